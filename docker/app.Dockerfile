FROM python:3.11-slim
WORKDIR /src
COPY . /src
RUN pip install --no-cache-dir ".[onnx]"
CMD ["python", "examples/metrics_app.py"]
