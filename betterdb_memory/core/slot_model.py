"""A learned "same exclusive slot" classifier for pairs of statements (rule 3 of ``core.supersession``).

Rule 3 asks whether two statements of one person say the same kind of attribute, one
that holds a single value at a time ("lives in Lisbon" / "moved to Berlin": yes;
"likes tea" / "likes coffee": no, many values; "lives in Lisbon" / "works at Acme":
no, two kinds). The hand-written prototypes (``core.slot_kinds``) answer it by
similarity to a few sentences per known kind, and every new wording or kind shifts
which side wins. This model answers it from the two statements' vectors with weights
fitted on thousands of labelled pairs of many kinds and wordings
(``bench/train_slot_model.py`` over ``bench/temporal_data/slot_training.py`` and the
designed-on set's training half):

    p(u, v) = sigmoid(u . (a * v) + s(u) + s(v) + b),   s(x) = (x * x) . c + x . d

a logistic regression on the symmetric features ``[u * v, u * u + v * v, u + v]``
(``pair_features``). ``s`` reads one statement's vector alone (what kind of attribute
it states and whether that kind is exclusive) and could be computed at write time;
the pair part is a weighted dot product (whether the two state the same kind).

The weights live in the vector space they were fitted in: the shipped ONNX MiniLM
(``FITTED_MODEL_ID``). ``for_model`` returns the model for that embedder only; any
other embedder keeps the prototypes, which it embeds itself. Shipped as constants
(base64 of little-endian float32, no download, no dependency beyond numpy).
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["FITTED", "FITTED_MODEL_ID", "THRESHOLD", "SlotModel", "for_model", "pair_features"]

FloatArray = npt.NDArray[np.float32]

#: The embedder whose vectors the weights are fitted on (``embedders.onnx.MODEL_ID``).
FITTED_MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"

# -- fitted (bench/train_slot_model.py --write rewrites this block)
WEIGHTS_B64 = (
    "G9g2QFQ5nD9Nzog/mQ7tP0JgAUAyL6U/cFsPQIMYuj+fm/Q/2eU1P3eXAED8Gfc/OA5rP4t72T+wdvU/bCuXPxGYF0CWFpM/"
    "juWqPwkp9D8G3Gw/E8zBPwm4kT9bx5A/snGQQMcc9T6ZEqE/Ix/+PxEAIT+r1a4/u3jBPwXnrT83V5Q/CWDEPqzfLUDn8ElA"
    "GYgiP6Ma+z+u1JA/fKQhQDbglD+hh3M/OGuEPyibBD/LCaw/HeRzP46MFj8UI9U/HccUQMqOND+bbxdAh4nVP2PbpD+zLNc/"
    "DmmDP2sDcT/XpZ0/ITKLP8OJB0C/cnc/w8rcP6uhPz+mVw8/0iRxP5sjqD+G7lE/M1AIP6quhEDNrIs/ZlYSQILmuj7z3LA/"
    "CdoUQA546z/xm9U/gKICQJ9whz9RodI/Pf8KQFmnrD82rwJAcnGqPxDB6z4yctg/ZG7MP0XWqD9RLFk/yI2GPzhUPUCNBJY/"
    "KJYYQO1fEEA8ssw/Q6wDPyLikT+nhcU/e+2xP0pErj9Q4R9ANWUvPzGsCUCuj98/Ml29PxbDzz9dXrs/6FDzPxZU7z6HZsE/"
    "e1aBP0T2PT/IOVY/rlKNP1UsoT9L7l0/y+UhQEkaxD+qe0BAsm7qP9u9FEDuHgBAUTjbP1kGiz8kN9U/JmwEQK2wyT83K7w/"
    "rMfsPwAAAABQGZE/Yf07P68Muz9Lj+s/zgkTQBkgBD9zpII/uAGZP7hRwD83auc//oC1P2luMEAOI/g/oKNIQOWdnkB1dgZA"
    "jM7VPzMIPT/2UK8/L5jRPyx3Nz9SvBxALuMnPwFGjz8Kxa4/OPMKQBWZqz/JxSk/DqMAQKsRsD6dW68/wKgzP6CJLECM68w/"
    "0PKnPxbIHj/fDso/q6kSPx+x7D8Gypw/Dx7GP2k7kj+wvS5AakMpQIARG0BfsmA/xVvpP7+pgT9L/lBAm42VP0k2wj9a4Dc/"
    "8PZOQM0O+j+8WOM/YobmPsgfiz+GM8g/wjHHP1gF0D9bCgNAwu9xPxBSvD/xGPc/lzP4P4TnnEAY+FdArSNtP/9LKkCYi9k/"
    "kkcIQGmPkD/BwYo/5Tb+P5f82z++sEo/rEi9P1/krD+PJ+o/Mft8PwXwnz+ckIg/g9wBQN9+C0COlntAyv3IP45E9T/FYvQ/"
    "FtMtQI2SmD/ABEo/wJ2WP0dIpz9o6FxAVBcUQAAAAAA8qaI/R2WYPw0qvz9XxXA/Xu+BP736aT9sV9E/qUcwQFyTMz8dOsw/"
    "FTRZQAijxT8PWOY/RYJzP7gKsj9+muk/KEcWQM3qOUCRTMw/rORsP87PQD+QEag/T3slP8fjLUA4J20/BX17P3yUR0C6KrM/"
    "LTasPwb3AkCwbMs/cFSvP77IyD/Z40hA077PP3LLjD+1cBpAwcqxP205sD/XsCNAqWLXPxmzyD8s/J8/FlWmPw5aRT+o9pU/"
    "m6rBP16HF0DGi9U/ifXJP26+G0AQpog/LNnnP7gEtz/yDylAXPjjP76k2z+IOpY/MzGnP5JMuD8VE64/ruAXP0oDXj+MbuQ/"
    "dbIGQFge+j+TZ3c/nSD7P9Ps9D/AN7A/thoBQH4Unz/lk+s/EqeAP0Nlnz/Jpm8/ZczcPy3v2z+zThVAm2KHP1NaXz/O6xRA"
    "eC6dP41AIUByiH0/cOLBP2fSiz+FOOQ/NfyNP5etxT/LLuI/yTsSQGCbNz/BjDVAuoXdP3tUoyjOHZQ/7UunPyohiT9/+SdA"
    "pVQ+P5yKJUAW2TZAwh6dP63Evz+h2s8/nwBEQGUw3j/8hro/aX68PwNp/z+40a0/17b3P8NdJ0Dft4g/6f2/P/WtKkDE2pk/"
    "Q1xTP3oE7z9fLL4/5cfYP7kqyT8X1J0/dpgHQME4F0DwTrQ/6HO9P1mQnz9RSFg/l37OP0LsjT+djzI/h7ShP/7e4z8uq8M/"
    "9xqFPx0Roj/G4KU/0OpDP1/4hj8Lcpk/7gRlQKoJ8j+u2FQ/tVTGP2q6sT9QAZI/m02ZP4c4J0Bv1JE/3AP5P/ce8D9IvwJA"
    "ccEsQAHdMj/7VeY/H2A1QI7r4D//PlM/GadjOxeyiz6h5wO9S8YovmDqkDsOLeC+P4HUPbJmjT1XSwM/4BKovsLstD5X0uG+"
    "sAmRvTD/gz3+jwM94vLgPi9bAz9XzNA9etROvvmdFT+ANxw+DvEkvyjQUT68bW2+ToB9PxtvCb8ahIC+KwuyPnNUVL6SvZY+"
    "4OIKP5izGD92EgK/KtcHvq/wD79gmDk8TbA4vbOVD7++Vvm+R/eoPmArjb3pRAW9L3mwPrcwzr5yURI+w4ojvvQfr7/lDR2/"
    "U2sHP6lk+r6VIis/EhE1Pumtvj5B5Yk7PWDyvu5czj58fT4+k5hFPmlN4z5H/E88ljxXvRckmb721jw+vJKtvQ4WHb5TCvu9"
    "O0ZFvpcUYD8253O/T5Lrvp6Y3r5wnd2+AY7lvsIt+z4Uawi/95VWPqAr2b2IThW/Z4oEP58MgD5dw969hSHMPZXkYr4Nn8U+"
    "PLmiPtK0pj69Bvi+P31JvqtiQL6XyLw9ltPYPkcCxb3ZdAy+13KfvcXgPLxDC3K+d6OKvEvFa78nLi69G8htvTQUgD7IOQa/"
    "UQ8YP4zTVD4ONT09oPmaPhsWkL8JvVS/1jvnvrANvb6bFQO+F/9evfqkiz2St5M+MtmdvZiTZb7i4oK/OC7Mvovq/b72Kow+"
    "JZ2WPlKkJ7+8L3O+L7c1PYWOBT/afpK+uxQbvQAAAABSSLW+YrgPv8dXsL3wyUY+Ga7mvllVqb6fsUc+IDoAvoDf9z7maEu9"
    "GGElO3YqEz9pXMO+EXwpPpAEAj/+VRo/RlLZvnwvu74vZ7M+X4+6PiNguLw0Cj8/jaPnvvy1zz65Q5e+eIfHPr7P876qcYs8"
    "d49Lv3gImz1lwcw+3wv4vlvnCT4CHQm+JH+UPvAXlr7sLL48ifjFviYuZz6vX+o98pi7PQNUh72dtI6+25BQP6RK1T62lrO+"
    "veL/PcqYhD6C10M+4CsvPRVDcj53xtm9MiyIPdZcfD2pBuG93hbHvpUIBj4cy1c+1EBsvXLzhz03rJA+aygFv8/OD79dP8A+"
    "s6DVPqJrsb5POEo/1BUIv3Kp1z4b5A6/NvkuPSSWfz4emFK+mgbqvmlz8T6GAQa/uE6Ruw6FjL7yGJ4+EYw/PSKaNb5N0oQ9"
    "U1A8P+VclT5EdKI7eDWnvpyGkT4iQw2/+ccUvkgssb7Tz8S+qUI5vVcsK742UIY9uevPPgAAAADS+Rg8/t4pvs6ncL53CzK/"
    "UYrlvn2tsr1dufC+mPwOPeAjo77Dmao+7f4eP9gP0b3hNDc/Td2XvoE+UT5Skw0/Vl3TvaOSsL/wsgM/AkWMviRXS76nmrY+"
    "bzSaPqPYX70UsOq+eICPPmjLfD7D7qS9L4t+PE0Vrr7eHDm+SYw0vi9AZr3YMQg/zpLmPuDGJr+HNk8+ZjWqPg/7Gz/25Mw+"
    "Nl24vV4g+D7pqcm+tJ0SP8kFAb/XW/69h0mkva8X1z79oee+dbRwP8JuRj1+VzM/WtrrPkcwn75BkQI/Zo8hPogXDb+cpvY8"
    "Kw8EP6hcSL/SnW++DrgKvxCnnLogQkY+xDBlvkHNFj+zWlS+LSalPUW3d74+kIO+SDzrPs0/oTvTYy0/jwSYvlQiKL9S4Wa+"
    "WN49vtvCub40EKk96NEHPQ+Qwz549f4+UoU0vsrurT6YjCA+29TsvR6eBL8vC1Q+uxgiPl6sKj7nkRG+OvwTPx9YiTy0q6Y+"
    "S10TvTiIASk//km+G0iAPvxHCz8I5Tc/9GJoPvyOrD69iCM/GI6wvhHonb6YcqI7WQCHPtCjtL3fxiU+PZiYvvRbj7617yg+"
    "8NGNvuVyGj/UFY490xCEPh+D1D2KLY4+J+SAPHrRET9S8Ro/AX42vj2ksT16Jea+1DExv1sOuDxe7xo/NT0AP2AMlT77uuy+"
    "WiOqvRE+Fj9ntwo7OSmePvjkIj5yRyM/ZeNnvwZX9L42hsm9R2tcuxwjT77sq6E9EVyEP43OCj55tQC+jmS3PfU4lj5kjGO+"
    "kv6PvnAA+T7XdGA+9ZJzPtqONbwvECI/cB6pviyoGL+0RAu/+XATP4YeG78PT6G9rGruvkF61L3kKb0/PSyvPoc7CEBvZNI/"
    "zJlsv9UeZT9gZh+/E/KsP60Ggb8eA2o+8YjGviaMsz+Obkk/7akzvi/o6z7nZbW/6du1PwrrJr4FFIc+kj1mPk4Bsz8qpQDA"
    "4E7NPfIVhr9V4Bg/7Ir+v/3Rg7/wygfA8mrZP1tb8T+Ylgc/AZftPwnenD++qSK/pbbUPzufOcC9A4G/5FbHv2ATc7+Uz3q+"
    "VaiJv8iVPD8SBpg/EIrCv0dVvD8GRIC8Sk8MwPB3l75GZUQ/V6sfPwFAM74Cq6o/w3TRviqqhr8FeKa/piIFQA5Rhj//VtU/"
    "iDisPzMef79KIFu/r1ZqvmU6wr7h5Ri/JZScvwjJBL9Jxg2/a1eRP9on+78RKbq+/WsDO/+hwT2kFNY94wo0vyKT1T4wGPE+"
    "h3AwP6itt7/n3Sg/6KnUv1gICT8QTFs+d47Pvz5hqj4JgJy/I4+Zvx5Wnr6TpgPADh9/v9LosD4OkNG/FXKhvgQxa79nYq8/"
    "4HCpv+lhiz5x18a/qJEmvwUMJj9TNC+/MFjZPgHo+b7SjtS9PLLqviH+LD8UxJQ+NbMPP/pjEUA59ao/gibBv4HNFcBA7KY/"
    "h8lnP2igPr9M/CTAW3QZPryJjT8UXoy9mzUiv+2Y8z018Xc9MT+fPx5PfL4WoQU9930AvxuuhQwm5XW/TMCSvu6xBL+kN0E/"
    "L84iwM1dFT8wmqO/B/LBvpbMWz/tz1e/st2mvwU0KD+NPJK/njjIP28tX7+rUDU/Oi6Avw+Dr7/XPUy/ieUVP05Zsr8OtLk/"
    "Wss8v1qhND/5gI48D48cvq3WUL/lbTNA902jv7oHdT4QOpC/jc8jv+IV1b/q75y+Y7FNvzSPGT95pRG/mksMvq4I+b5+hdE9"
    "px7PPkP90r6SB14/nbwLQGnY6T65FdW+HU7Gv3A+6D+s9eI/SPoBvz7mtj7fqja+wZ5NwLUvVr8nSktALaUTwEgpiL/oeW0/"
    "1R8FwIilxLyDwge/KUnyPkjhEr96TIO/+BN+vnBdiT54Thc/sOCAv87bwL/FoOY/WfuAP7PTUD+7xLS/2xV4PmLELj/xEj0/"
    "GRduvwidP79QxQPAqqBDvd6uaL4GnGFA/MWpP6Juvz+ZAKE/6PBwPxkXl72EiOG+UEAFPp8ZEr8JMIo+3AyhP8VSVD/EtA8/"
    "3qiQP4QtkYyiYDk9SXM5wERXvT4hyhO/DPI6P5OIiz2IoKQ/MTKRvuU9rr6WL90+8GKDvVnSFb+M+kW/sBmePwB5Zb8smCk/"
    "5aMBwECyjr8yE1m/rEN4v5VJQD2afAq/iZISwObB7L5UdQm+xQOrv/1Yjj5DnwtArOESQFLIA0DIak2/gJdcP5yonb2eCgc/"
    "ABY2P3gcnr8hb/y/xucmP52UcT96XMA/+XYuv7r6Gb8Yg3s/27ZwPzLo4r6Igba+Xmpdv0/HFD/vbjY/y9Sjvyx/Sj3SBVo/"
    "vsuTP9X3F0C1WZ0/+lK2PpSY+z9Jvq4+w3eAvxMUCMDyLDY/9UevP4naJz/NBbU/pjMlvx4PQj/l/Lo/cDKivwCVBr+uFynA"
    "aG70PtuadL8c1XO/M8AMvvti3T+/hgLAkl1FQK1Tbb/HeLY/WYkLvzswkj+K1PS+BG8fP0e7lD/jaJa/RBDVvrxSz75V77w9"
    "kFfrP6ZxRcBv97G/EBgHwKZtFT98Vzm8lPSMP/I8UrXrFVBAS2L6Pi8lDr/8Q14/Ur+hPbxosL8+ioq+UpbfPtyZnD/duas/"
    "JgQovtAU379eNEs/nCaNv9rFpT16IT28gt7Xv/btQMCO9Wc/evlPv89C/b7wfie/OIqSv+a827zdKG2/RqGNv+iMfD/5OHc/"
    "wEsyv5eAsT/q7aG+2v8lv1bulL6UHJY+Zto/v/RWgb+TmZ+/HnvUPzhN7b6OBd+/FYtuPlotzb706Mu/0jYXQIKxdbt+1GI/"
    "wSFmv6EDMz6WbN2+haMDPfcQkL+ZU6e/DllZvpQJqz6vF0Y8ozOWPzglmz8Br4+/vcwov1La7jxU5iVA45vJPipz4z4ArjC+"
    "3MJNwA=="
)
THRESHOLD = 0.07
FITTED = "logistic, L2 1.0, 53135 pairs (5196 positive) of slot_training + knowledge_updates even people; threshold: false positives on same many-valued kind <= 0.01 on people held out (4 folds); used as a veto of the prototype pairs"
# -- end fitted


def pair_features(a: FloatArray, b: FloatArray) -> FloatArray:
    """Rows ``[u * v, u * u + v * v, u + v]`` of paired rows of ``a`` and ``b`` (symmetric in the pair)."""
    out: FloatArray = np.hstack([a * b, a * a + b * b, a + b]).astype(np.float32)
    return out


@dataclass(frozen=True, slots=True)
class SlotModel:
    """The fitted weights, split as the formula in the module docstring reads them."""

    pair: FloatArray  # a: (d,)
    square: FloatArray  # c: (d,)
    linear: FloatArray  # d: (d,)
    bias: float
    threshold: float

    @classmethod
    def of(cls, weights: npt.ArrayLike, threshold: float) -> SlotModel:
        """From ``3 d + 1`` weights in ``pair_features``' order, the bias last."""
        w = np.asarray(weights, dtype=np.float32).ravel()
        if len(w) < 4 or (len(w) - 1) % 3:
            raise ValueError(f"expected 3 d + 1 weights, got {len(w)}")
        d = (len(w) - 1) // 3
        return cls(w[:d], w[d : 2 * d], w[2 * d : 3 * d], float(w[-1]), float(threshold))

    @property
    def dimensions(self) -> int:
        return len(self.pair)

    def own(self, vectors: FloatArray) -> FloatArray:
        """``s(x)`` per row: the part of the score one statement's vector decides alone."""
        out: FloatArray = (vectors * vectors) @ self.square + vectors @ self.linear
        return out

    def probabilities(self, vectors: FloatArray) -> FloatArray:
        """(n, n): the probability that rows i and j state the same exclusive slot."""
        own = self.own(vectors)
        logits = (vectors * self.pair) @ vectors.T + own[:, None] + own[None, :] + self.bias
        out: FloatArray = (1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))).astype(np.float32)
        return out

    def same_slot(self, vectors: FloatArray) -> npt.NDArray[np.bool_]:
        """(n, n): ``probabilities`` at least the fitted threshold."""
        out: npt.NDArray[np.bool_] = self.probabilities(vectors) >= self.threshold
        return out


@functools.cache
def _fitted() -> SlotModel | None:
    if not WEIGHTS_B64:
        return None
    return SlotModel.of(np.frombuffer(base64.b64decode(WEIGHTS_B64), dtype="<f4"), THRESHOLD)


def for_model(model_id: str, dimensions: int) -> SlotModel | None:
    """The shipped model for vectors of ``model_id`` (None for any other embedder: prototypes then)."""
    model = _fitted()
    if model is None or model_id != FITTED_MODEL_ID or dimensions != model.dimensions:
        return None
    return model
