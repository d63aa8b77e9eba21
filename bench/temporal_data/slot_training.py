"""Training statements for the learned same-slot classifier (``core.slot_model``), issue 26.

Many kinds of attribute, one value at a time (exclusive) or many at once, each with
several wordings, for people of this module's own names. Pairs of one person's
statements are the classifier's examples: the same exclusive kind is a positive (a
newer statement replaces the older); the same many-valued kind, or two different
kinds, a negative. Written after ``knowledge_updates_fresh2`` and deliberately without
its new kinds (dentist, insurer, internet provider, hairdresser, neighbourhood;
children, collections, volunteering, podcasts, qualifications) and without any of its
or ``knowledge_updates_fresh``'s templates: both stay held out. Deterministic
(``build(seed)``), nothing downloaded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "KINDS",
    "KINDS_ROUND2",
    "KINDS_ROUND3",
    "PREFIXES",
    "SUFFIXES",
    "TrainStatement",
    "build",
    "shaped",
]


@dataclass(frozen=True, slots=True)
class TrainStatement:
    text: str
    person: int
    kind: str
    exclusive: bool
    order: int  # position in time within the person's statements of this kind


_CITY = ["Marseille", "Rotterdam", "Krakow", "Bergen", "Genoa", "Malmo", "Dresden", "Ljubljana", "Split",
         "Calgary", "Perth", "Sapporo", "Medellin", "Cusco", "Tbilisi", "Riga", "Bristol", "Leeds"]  # fmt: skip
_COUNTRY = ["Portugal", "Canada", "Japan", "Kenya", "Norway", "Chile", "Ireland", "Poland", "Mexico", "Italy"]
_FIRM = ["Acorn Logistics", "Bluefin Capital", "Cobalt Robotics", "Dovetail Media", "Evergreen Foods",
         "Falcon Air", "Granite Insurance Brokers", "Harbor Health", "Ironclad Security", "Juniper Retail",
         "Keystone Energy", "Lighthouse Games"]  # fmt: skip
_JOB = ["baker", "surveyor", "optician", "copywriter", "plumber", "statistician", "zookeeper", "radiographer",
        "interpreter", "landscape gardener", "barista", "actuary", "welder", "court reporter"]  # fmt: skip
_PARTNER = ["Bea", "Caspar", "Dora", "Emil", "Fleur", "Gus", "Hedda", "Iggy", "Juno", "Kai", "Lotte", "Milo"]
_CAR = ["Toyota Yaris", "Ford Kuga", "Suzuki Swift", "Volvo V60", "Kia Ceed", "BMW i3", "Renault Zoe",
        "Mazda 3", "VW Passat", "Tesla Model Y"]  # fmt: skip
_PHONE = ["iPhone 13", "iPhone SE", "Pixel 7a", "Galaxy A54", "Xiaomi 13", "Honor 90", "Nokia X30", "Pixel 9"]
_LAPTOP = ["MacBook Air", "ThinkPad X1", "Dell XPS 13", "Surface Laptop", "Framework 13", "HP Spectre"]
_UNI = ["Leiden University", "the University of Vienna", "Uppsala University", "KU Leuven", "Bocconi",
        "the University of Edinburgh", "Politecnico di Milano", "Aalto University"]  # fmt: skip
_MAJOR = ["biology", "economics", "philosophy", "mechanical engineering", "linguistics", "nursing", "law"]
_BANK = ["Sparkasse", "Danske Bank", "Santander", "Metro Bank", "Starling", "ABN AMRO", "Handelsbanken"]
_GP = ["Dr Kovacs", "Dr Olsen", "Dr Abara", "Dr Pereira", "Dr Wright", "Dr Tanaka", "Dr Sandoval"]
_TEAM = ["Liverpool", "Bayern Munich", "Roma", "Marseille", "Galatasaray", "Boca Juniors", "Rangers"]
_GYM = ["PureGym", "Anytime Fitness", "the YMCA", "Iron Temple", "FitHub", "the leisure centre"]
_DIET = ["vegan", "vegetarian", "pescatarian", "keto", "gluten-free", "on a low-carb diet"]
_HOBBY = ["bouldering", "origami", "beekeeping", "trail running", "calligraphy", "model trains", "go"]
_BOSS = ["Mr Grant", "Ms Ferreira", "Mr Ali", "Ms Byrne", "Dr Koenig", "Ms Ota"]
_DEPT = ["finance", "the legal team", "marketing", "research", "customer support", "logistics"]
_LANDLORD = ["Mrs Pike", "a housing association", "Mr Duval", "a letting agency", "Mrs Ahn"]
_VET = ["Dr Moss at Paws Clinic", "the Hillside vet", "Dr Reyna", "the Riverside animal clinic"]
_THERAPIST = ["Dr Lund", "a counsellor named Iris", "Dr Mahler", "a therapist called Joel"]
_RESTAURANT = ["Casa Rosa", "the Golden Lotus", "Bistro Nord", "Taqueria Luz", "Pho Saigon"]
_BAND = ["Radiohead", "ABBA", "Daft Punk", "Fleetwood Mac", "Arctic Monkeys", "Portishead"]
_COLOUR = ["teal", "burgundy", "mustard yellow", "navy", "forest green", "lilac"]
_AGE = ["29", "31", "38", "42", "47", "53", "61"]
_SALARY = ["40,000 euros", "55,000 euros", "62,000 dollars", "75,000 pounds", "90,000 dollars"]
_EMAIL = ["kit@example.org", "hello@mailbox.test", "mk77@post.test", "j.doe@inbox.test"]
_HOMETYPE = ["a studio flat", "a terraced house", "a houseboat", "a farmhouse", "a loft", "a bungalow"]
_PARTY = ["the Greens", "the Liberals", "the Social Democrats", "the Conservatives", "the Pirate Party"]
_COMMUTE = ["by bike", "by train", "by bus", "on foot", "by car", "by scooter"]

_LIKE = ["olives", "thunderstorms", "crime novels", "lemon cake", "street food", "opera", "autumn", "tapas"]
_DISLIKE = ["mushrooms", "crowds", "flying", "loud music", "cold weather", "spiders", "karaoke"]
_LANG = ["Norwegian", "Basque", "Farsi", "Malay", "Romanian", "Welsh", "Amharic", "Icelandic"]
_PET = ["a corgi", "two goldfish", "a tabby cat", "a gecko", "a rescue greyhound", "a canary"]
_INSTR = ["the harp", "the trumpet", "the accordion", "the banjo", "the clarinet", "the bass guitar"]
_FRIEND = ["Pavel", "Greer", "Tobias", "Anya", "Rashid", "Solveig", "Kenji", "Beatriz"]
_TRIP = ["Iceland", "Mongolia", "Oman", "Ghana", "Uruguay", "Slovenia", "Bhutan", "Fiji", "Malta"]
_SPORT = ["basketball", "rowing", "judo", "handball", "cricket", "golf", "archery", "netball"]
_DISH = ["goulash", "falafel", "sourdough", "jollof rice", "ramen broth", "moussaka", "pierogi"]
_ALLERGY = ["bee stings", "latex", "sesame", "mould", "tree nuts", "ibuprofen"]
_BOOK = ["Middlemarch", "Dune", "Beloved", "The Hobbit", "War and Peace", "Circe", "Neuromancer"]
_FILM = ["Casablanca", "Parasite", "Amelie", "Alien", "Spirited Away", "Heat", "Vertigo"]
_SKILL = ["juggle", "code in Rust", "sew", "ski", "drive a tractor", "solder circuits", "bake croissants"]
_SIBLING = ["a brother called Ivo", "a sister called Mae", "an older brother", "a younger sister"]
_COLLEAGUE = ["Harriet", "Oskar", "Dev", "Lucia", "Finn", "Mariam"]
_CONCERT = ["a Coldplay gig", "a jazz festival", "an opera night", "a punk show", "a Bach recital"]
_COURSE = ["a pottery course", "an evening class in Italian", "a coding bootcamp", "a wine course"]
_APP = ["Duolingo", "Strava", "Notion", "Spotify", "Signal", "Goodreads"]
_GAME = ["Minecraft", "chess online", "Catan", "Zelda", "bridge", "poker"]
_PLANT = ["tomatoes", "basil", "orchids", "sunflowers", "chillies", "a lemon tree"]
_AWARD = ["a poetry prize", "an employee of the month award", "a chess trophy", "a design award"]
_CLUB = ["a book club", "a choir", "a rowing club", "a film society", "a hiking group"]
_TATTOO = ["a tattoo of a swallow", "a rose tattoo", "a compass tattoo", "an anchor tattoo"]

# kind: (exclusive, values, templates)
KINDS: dict[str, tuple[bool, list[str], tuple[str, ...]]] = {
    "city": (True, _CITY, ("{n} lives in {v}.", "{n} moved to {v}.", "{n} has settled in {v}.",
                           "{n} now resides in {v}.", "Home for {n} is {v}.", "{n} relocated to {v} last year.")),
    "country": (True, _COUNTRY, ("{n} lives in {v} now.", "{n} emigrated to {v}.", "{n} is based in {v}.",
                                 "{n}'s country of residence is {v}.")),
    "home_type": (True, _HOMETYPE, ("{n} lives in {v}.", "{n}'s home is {v}.", "{n} bought {v}.",
                                    "{n} now rents {v}.")),
    "employer": (True, _FIRM, ("{n} works at {v}.", "{n} joined {v}.", "{n} is employed at {v}.",
                               "{n} took a position at {v}.", "{n}'s company is {v}.", "{n} now works for {v}.")),
    "job": (True, _JOB, ("{n} is a {v}.", "{n} works as a {v}.", "{n} became a {v}.",
                         "{n}'s occupation is {v}.", "{n} makes a living as a {v}.", "{n} is working as a {v} now.")),
    "boss": (True, _BOSS, ("{n} reports to {v}.", "{n}'s manager is {v}.", "{n}'s boss is {v}.",
                           "{n} has a new line manager, {v}.")),
    "department": (True, _DEPT, ("{n} works in {v}.", "{n} transferred to {v}.", "{n} moved over to {v} at work.",
                                 "{n}'s department is {v}.")),
    "partner": (True, _PARTNER, ("{n} is married to {v}.", "{n} is dating {v}.", "{n}'s partner is {v}.",
                                 "{n} got together with {v}.", "{n}'s wife is {v}.", "{n}'s husband is {v}.",
                                 "{n} is engaged to {v}.")),
    "car": (True, _CAR, ("{n} drives a {v}.", "{n} bought a {v}.", "{n}'s car is a {v}.",
                         "{n} got a {v} as a new car.", "{n} now drives a {v}.")),
    "phone": (True, _PHONE, ("{n} has a {v}.", "{n}'s phone is a {v}.", "{n} switched to a {v}.",
                             "{n} uses a {v} as a phone.", "{n} got a new {v} phone.")),
    "laptop": (True, _LAPTOP, ("{n} works on a {v}.", "{n}'s laptop is a {v}.", "{n} bought a {v} laptop.",
                               "{n} replaced the laptop with a {v}.")),
    "university": (True, _UNI, ("{n} studies at {v}.", "{n} is enrolled at {v}.", "{n} started a degree at {v}.",
                                "{n} is a student at {v}.", "{n} transferred to {v}.")),
    "major": (True, _MAJOR, ("{n} is majoring in {v}.", "{n} studies {v}.", "{n} switched degree to {v}.",
                             "{n}'s subject is {v}.")),
    "bank": (True, _BANK, ("{n} banks with {v}.", "{n}'s bank is {v}.", "{n} moved the account to {v}.",
                           "{n} opened an account at {v}.")),
    "gp": (True, _GP, ("{n}'s doctor is {v}.", "{n} is registered with {v}.", "{n}'s GP is {v}.",
                       "{n} sees {v} as a family doctor.")),
    "team": (True, _TEAM, ("{n} supports {v}.", "{n} is a {v} fan.", "{n}'s football team is {v}.",
                           "{n} follows {v} every match.")),
    "gym": (True, _GYM, ("{n} goes to {v}.", "{n} joined {v} to work out.", "{n}'s gym is {v}.",
                         "{n} trains at {v}.")),
    "diet": (True, _DIET, ("{n} is {v}.", "{n} went {v}.", "{n} eats {v} now.", "{n}'s diet: {v}.")),
    "fav_hobby": (True, _HOBBY, ("{n}'s favourite hobby is {v}.", "{n}'s main passion is {v}.",
                                 "{n} spends every free moment on {v}.", "{n}'s hobby these days is {v}.")),
    "landlord": (True, _LANDLORD, ("{n}'s landlord is {v}.", "{n} rents from {v}.", "{n} pays rent to {v}.")),
    "vet": (True, _VET, ("{n}'s vet is {v}.", "{n} takes the dog to {v}.", "{n} switched vet to {v}.")),
    "therapist": (True, _THERAPIST, ("{n} sees {v} for therapy.", "{n}'s therapist is {v}.",
                                     "{n} started counselling with {v}.")),
    "fav_restaurant": (True, _RESTAURANT, ("{n}'s favourite restaurant is {v}.", "{n}'s go-to place to eat is {v}.",
                                           "{n} likes {v} best of all restaurants.")),
    "fav_band": (True, _BAND, ("{n}'s favourite band is {v}.", "{n}'s all-time favourite group is {v}.",
                               "Above all, {n} loves {v}.")),
    "fav_colour": (True, _COLOUR, ("{n}'s favourite colour is {v}.", "{n} likes {v} best of all colours.",
                                   "{n}'s colour of choice is {v}.")),
    "age": (True, _AGE, ("{n} is {v} years old.", "{n} turned {v}.", "{n} is {v} now.", "{n}'s age is {v}.")),
    "salary": (True, _SALARY, ("{n} earns {v} a year.", "{n}'s salary is {v}.", "{n} got a raise to {v}.",
                               "{n} makes {v} annually.")),
    "email": (True, _EMAIL, ("{n}'s email is {v}.", "{n} changed email address to {v}.",
                             "{n} can be reached at {v}.")),
    "party": (True, _PARTY, ("{n} votes for {v}.", "{n} is a member of {v}.", "{n} supports {v} in elections.")),
    "commute": (True, _COMMUTE, ("{n} commutes {v}.", "{n} gets to work {v}.", "{n} travels to the office {v}.")),
    # many-valued
    "likes": (False, _LIKE, ("{n} likes {v}.", "{n} loves {v}.", "{n} enjoys {v}.", "{n} is keen on {v}.",
                             "{n} really likes {v}.", "{n} is into {v}.")),
    "dislikes": (False, _DISLIKE, ("{n} hates {v}.", "{n} dislikes {v}.", "{n} can't stand {v}.",
                                   "{n} is not a fan of {v}.")),
    "language": (False, _LANG, ("{n} speaks {v}.", "{n} is learning {v}.", "{n} is fluent in {v}.",
                                "{n} studied {v} at night school.", "{n} knows some {v}.")),
    "pet": (False, _PET, ("{n} has {v}.", "{n} adopted {v}.", "{n} owns {v}.", "{n} got {v} as a pet.")),
    "instrument": (False, _INSTR, ("{n} plays {v}.", "{n} is learning {v}.", "{n} took up {v}.",
                                   "{n} practises {v}.")),
    "friend": (False, _FRIEND, ("{n} is friends with {v}.", "{n} meets {v} for coffee.",
                                "{n} went on holiday with {v}.", "{n}'s friend {v} visited.",
                                "{n} and {v} are old friends.")),
    "trip": (False, _TRIP, ("{n} has been to {v}.", "{n} visited {v}.", "{n} travelled to {v}.",
                            "{n} went on holiday to {v}.", "{n} spent a week in {v}.")),
    "sport": (False, _SPORT, ("{n} plays {v}.", "{n} does {v}.", "{n} took up {v}.", "{n} is on a {v} team.",
                              "{n} trains for {v} twice a week.")),
    "dish": (False, _DISH, ("{n} cooks {v}.", "{n} can make {v}.", "{n} makes excellent {v}.",
                            "{n} learned how to cook {v}.")),
    "allergy": (False, _ALLERGY, ("{n} is allergic to {v}.", "{n} has an allergy to {v}.",
                                  "{n} cannot tolerate {v}.")),
    "book": (False, _BOOK, ("{n} read {v}.", "{n} finished reading {v}.", "{n} is reading {v}.",
                            "{n} loved the book {v}.")),
    "film": (False, _FILM, ("{n} watched {v}.", "{n} saw {v} at the cinema.", "{n} rewatched {v}.")),
    "skill": (False, _SKILL, ("{n} can {v}.", "{n} knows how to {v}.", "{n} learned to {v}.")),
    "sibling": (False, _SIBLING, ("{n} has {v}.", "{n} grew up with {v}.", "{n} is close to {v}.")),
    "colleague": (False, _COLLEAGUE, ("{n} works with {v}.", "{n}'s colleague {v} helped out.",
                                      "{n} shares a desk with {v}.")),
    "concert": (False, _CONCERT, ("{n} went to {v}.", "{n} attended {v}.", "{n} saw {v} live.")),
    "course": (False, _COURSE, ("{n} took {v}.", "{n} signed up for {v}.", "{n} completed {v}.")),
    "app": (False, _APP, ("{n} uses {v}.", "{n} installed {v}.", "{n} is on {v} every day.")),
    "game": (False, _GAME, ("{n} plays {v}.", "{n} is hooked on {v}.", "{n} enjoys a round of {v}.")),
    "plant": (False, _PLANT, ("{n} grows {v}.", "{n} planted {v}.", "{n} has {v} in the garden.")),
    "award": (False, _AWARD, ("{n} won {v}.", "{n} was given {v}.", "{n} received {v}.")),
    "club": (False, _CLUB, ("{n} joined {v}.", "{n} is part of {v}.", "{n} goes to {v} on Thursdays.")),
    "tattoo": (False, _TATTOO, ("{n} has {v}.", "{n} got {v}.", "{n} recently got {v}.")),
}  # fmt: skip

# -- round 2 (the kind profiles): more kinds, and many-valued kinds that share an exclusive kind's
# values (hard negatives). Round 1's garden plants are left out: fresh3's houseplants stay unseen.
_STREET = ["Mill Lane", "Harbour Road", "Elm Grove", "Station Street", "Canal Walk", "Church Row"]
_TITLE = ["senior analyst", "team lead", "head of sales", "junior partner", "principal engineer", "director"]
_MENTOR = ["Professor Hale", "Dr Obi", "Ms Rasmussen", "Mr Casey", "Dr Petrov"]
_LAWYER = ["Ms Delacroix", "Hughes & Co", "Mr Lam", "a solicitor called Petra", "Baxter Legal"]
_OPTICIAN = ["Specsavers", "Vision Express", "Dr Engel", "the optician on King Street"]
_TUTOR = ["Madame Roux", "a tutor called Sami", "Mr Eriksen", "Ms Iqbal"]
_INSTRUCTOR = ["Dave from Pass First", "Ms Carrow", "a driving instructor named Luke", "Mr Haddad"]
_MECHANIC = ["Kwik Fit", "the garage on Bridge Street", "Tony's Autos", "a mobile mechanic called Ray"]
_SHOP = ["Lidl", "Waitrose", "Aldi", "the co-op", "Tesco", "Carrefour", "Albert Heijn"]
_CAFE = ["Blue Bottle", "the corner cafe", "Cafe Nero", "Monmouth Coffee", "Bean There"]
_PAPER = ["The Guardian", "Le Monde", "The Times", "El Pais", "Die Zeit", "the local paper"]
_BROWSER = ["Firefox", "Chrome", "Safari", "Brave", "Edge", "Vivaldi"]
_OS = ["Linux", "Windows 11", "macOS", "ChromeOS", "Ubuntu"]
_BIKE = ["a Brompton", "a road bike", "an e-bike", "a fixie", "a mountain bike", "a cargo bike"]
_FAITH = ["Catholic", "Buddhist", "Muslim", "Quaker", "agnostic", "Jewish"]
_SHIFT = ["the night shift", "the early shift", "weekends only", "a four-day week", "part-time hours"]
_HAIR = ["red", "blonde", "grey", "jet black", "bright blue", "brown"]
_STATUS = ["single", "married", "divorced", "engaged", "widowed", "separated"]
_FOOD = ["lasagne", "pad thai", "paella", "fish and chips", "dumplings", "tacos"]
_SEASON = ["spring", "late autumn", "midsummer", "winter", "early autumn"]
_PLAYS_FOR = ["FC Eastside", "the Rovers", "Old Boys RFC", "Riverside United", "the Lions"]
_HOLIDAY_HOME = ["a cabin in Norway", "a flat in Nice", "a cottage in Wales", "a chalet in the Alps"]
_MUSEUM = ["the Louvre", "the Prado", "the Rijksmuseum", "MoMA", "the Uffizi", "the Tate Modern"]
_HIKE = ["the West Highland Way", "Kilimanjaro", "the Camino", "Mont Blanc", "the Inca Trail"]
_INJURY = ["a broken wrist", "a torn ligament", "a sprained ankle", "a cracked rib", "whiplash"]
_GIFT = ["a watch", "a signed poster", "a camera", "a painting", "a kayak"]
_PROJECT = ["a treehouse", "a podcast studio", "a vegetable patch", "a chess app", "a short film"]
_WATCHES = ["tennis", "Formula 1", "snooker", "the Tour de France", "ice hockey", "darts"]
_EXHIBIT = ["a Monet exhibition", "a photography show", "a design fair", "a dinosaur exhibition"]

KINDS_ROUND2: dict[str, tuple[bool, list[str], tuple[str, ...]]] = {
    k: v for k, v in KINDS.items() if k != "plant"
}
KINDS_ROUND2.update({
    "street": (True, _STREET, ("{n} lives on {v}.", "{n}'s address is on {v}.", "{n} moved to a flat on {v}.",
                               "{n}'s house is on {v}.")),
    "title": (True, _TITLE, ("{n}'s job title is {v}.", "{n} was promoted to {v}.", "{n} holds the title of {v}.",
                             "{n} is {v} at the firm.")),
    "mentor": (True, _MENTOR, ("{n}'s mentor is {v}.", "{n} is mentored by {v}.", "{n}'s PhD supervisor is {v}.")),
    "lawyer": (True, _LAWYER, ("{n}'s lawyer is {v}.", "{n} is represented by {v}.", "{n} hired {v} as a lawyer.")),
    "optician": (True, _OPTICIAN, ("{n} gets glasses from {v}.", "{n}'s optician is {v}.",
                                   "{n} had an eye test at {v} and stays with them.")),
    "tutor": (True, _TUTOR, ("{n}'s piano teacher is {v}.", "{n} takes lessons from {v}.",
                             "{n} is taught by {v} every Tuesday.")),
    "instructor": (True, _INSTRUCTOR, ("{n}'s driving instructor is {v}.", "{n} learns to drive with {v}.",
                                       "{n} switched driving instructor to {v}.")),
    "mechanic": (True, _MECHANIC, ("{n}'s car is serviced at {v}.", "{n}'s mechanic is {v}.",
                                   "{n} takes the car to {v} for repairs.")),
    "supermarket": (True, _SHOP, ("{n} does the weekly shop at {v}.", "{n}'s supermarket is {v}.",
                                  "{n} buys groceries at {v}.")),
    "cafe": (True, _CAFE, ("{n}'s regular coffee place is {v}.", "{n} gets a coffee at {v} every morning.",
                           "{n}'s local cafe is {v}.")),
    "newspaper": (True, _PAPER, ("{n} reads {v} every morning.", "{n} subscribes to {v} as a daily paper.",
                                 "{n}'s newspaper is {v}.")),
    "browser": (True, _BROWSER, ("{n}'s browser is {v}.", "{n} browses the web with {v}.",
                                 "{n} switched the default browser to {v}.")),
    "os": (True, _OS, ("{n}'s computer runs {v}.", "{n} uses {v} as an operating system.",
                       "{n} moved the laptop over to {v}.")),
    "bike": (True, _BIKE, ("{n} rides {v}.", "{n}'s bicycle is {v}.", "{n} cycles to work on {v}.")),
    "faith": (True, _FAITH, ("{n} is {v}.", "{n}'s religion: {v}.", "{n} converted and is {v}.")),
    "shift": (True, _SHIFT, ("{n} works {v}.", "{n} is on {v}.", "{n}'s schedule is {v}.")),
    "hair": (True, _HAIR, ("{n}'s hair is {v}.", "{n} dyed their hair {v}.", "{n} has {v} hair.")),
    "status": (True, _STATUS, ("{n} is {v}.", "{n}'s marital status is {v}.", "{n} has been {v} for a while.")),
    "fav_food": (True, _FOOD, ("{n}'s favourite food is {v}.", "{n}'s comfort food is {v}.",
                               "If asked, {n} names {v} as the best dish.")),
    "fav_season": (True, _SEASON, ("{n}'s favourite season is {v}.", "{n} likes {v} best of the year.")),
    "plays_for": (True, _PLAYS_FOR, ("{n} plays for {v}.", "{n} signed for {v}.", "{n} is in the squad of {v}.")),
    "holiday_home": (True, _HOLIDAY_HOME, ("{n} owns {v} for holidays.", "{n}'s holiday home is {v}.",
                                           "{n} spends every August at {v}.")),
    # many-valued, some sharing an exclusive kind's values (hard negatives)
    "clients": (False, _FIRM, ("{n} has {v} as a client.", "{n} did a project for {v}.", "{n} consults for {v}.")),
    "interviews": (False, _FIRM, ("{n} had a job interview at {v}.", "{n} applied for a role at {v}.")),
    "test_drives": (False, _CAR, ("{n} test-drove a {v}.", "{n} rented a {v} for a road trip.")),
    "city_trips": (False, _CITY, ("{n} spent a weekend in {v}.", "{n} went to a wedding in {v}.",
                                  "{n} was in {v} for a conference.")),
    "museum": (False, _MUSEUM, ("{n} went to {v}.", "{n} spent a day at {v}.", "{n} toured {v} last year.")),
    "hike": (False, _HIKE, ("{n} hiked {v}.", "{n} walked {v}.", "{n} climbed {v}.")),
    "injury": (False, _INJURY, ("{n} had {v}.", "{n} recovered from {v}.", "{n} got {v} skiing.")),
    "gift": (False, _GIFT, ("{n} was given {v}.", "{n} got {v} as a birthday present.", "{n} received {v}.")),
    "project": (False, _PROJECT, ("{n} built {v}.", "{n} is working on {v}.", "{n} started {v} as a side project.")),
    "watches": (False, _WATCHES, ("{n} watches {v}.", "{n} follows {v} on TV.", "{n} never misses {v}.")),
    "exhibition": (False, _EXHIBIT, ("{n} saw {v}.", "{n} visited {v}.", "{n} went to {v} in town.")),
})  # fmt: skip

# -- round 3 (kindcv): many more kinds, so that a kind the profiles never saw falls near known
# ones of its own sort (a service someone uses, a number someone has, a role someone holds; things
# someone has done or owns several of). Written after ``knowledge_updates_fresh5`` and without any of
# the held-out families' kinds or near-synonyms of them (no pharmacy, pension, childcare, boat, shoe
# size, rating, coworking, publisher, voice part, wake-up time; no patents, bylines, boards, dances,
# birds, lectures; none of fresh2-4's kinds).
_PLUMBER = ["Mr Doyle", "PipeWorks", "a plumber called Stan", "Flowright Plumbing", "Mrs Kaya's firm"]
_ELECTRICIAN = ["Sparks & Sons", "Mr Novak", "an electrician named Bruno", "Brightline Electrical"]
_CLEANER = ["Marta", "a firm called Sparkle", "Mr Obi", "Shine Cleaning", "a cleaner named Luz"]
_GARDENER = ["Green Thumb Ltd", "Mr Ashdown", "a gardener called Fern", "the Hedgerow company"]
_TAILOR = ["Mr Rossi", "Stitch & Hem", "a tailor on Savile Row", "Mrs Chen's alterations"]
_VENDOR_CARD = ["Amex", "Visa from Chase", "a Mastercard from HSBC", "a Monzo debit card", "Discover"]
_MORTGAGE = ["Halifax", "Coventry Building Society", "Nationwide", "Yorkshire Bank", "Skipton"]
_HANDICAP = ["12", "18", "9", "24", "6", "15"]
_PB = ["3 hours 40", "3 hours 15", "4 hours 2", "2 hours 58", "3 hours 30"]
_HEIGHT = ["1.62 m", "1.70 m", "1.78 m", "1.85 m", "1.91 m"]
_WEIGHT = ["62 kilos", "70 kilos", "78 kilos", "85 kilos", "91 kilos"]
_BELT = ["a yellow belt", "a green belt", "a blue belt", "a brown belt", "a black belt"]
_SHIRT = ["7", "9", "10", "11", "14", "23"]
_GRADE = ["year 5", "year 6", "year 8", "year 10", "sixth form"]
_RENT = ["800 a month", "950 a month", "1,100 a month", "1,300 a month", "1,500 a month"]
_POSTCODE = ["E2 7QL", "N1 9GU", "SW9 8JX", "M4 1HN", "B15 2TT", "LS6 3DN"]
_TIMEZONE = ["Central European Time", "Eastern Time", "Pacific Time", "GMT", "Japan Standard Time"]
_HANDLE = ["@kitmakes", "@quietfox", "@the_real_jo", "@bytesandbeans", "@northwind"]
_COFFEE = ["a flat white", "an oat latte", "a double espresso", "a cortado", "a black americano"]
_DRINK = ["gin and tonic", "a dry cider", "red wine", "an IPA", "sparkling water"]
_AUTHOR = ["Ursula Le Guin", "Toni Morrison", "Haruki Murakami", "Zadie Smith", "Terry Pratchett"]
_WATCH = ["a Casio", "an Apple Watch", "a Seiko", "a Garmin", "an old Omega"]
_SCENT = ["Chanel No 5", "a cedar cologne", "Jo Malone lime", "Dior Sauvage", "a rose oil"]
_BAND_IN = ["the Velvet Moths", "a jazz trio", "Static Harbour", "a covers band", "the Low Tides"]
_ROLE_PLAY = ["Hamlet", "Lady Macbeth", "Willy Loman", "Puck", "Blanche DuBois"]
_THESIS = ["coral reefs", "medieval trade", "quantum dots", "language acquisition", "urban heat"]
_WARD = ["the cardiology ward", "A&E", "the maternity ward", "intensive care", "the children's ward"]
_ROUTE = ["the number 12", "route 38", "the night bus N5", "the airport shuttle", "route 7"]
_CLASS = ["year 3", "reception", "year 9 maths", "A-level chemistry", "year 6"]
_BEAT = ["politics", "crime", "science", "the courts", "sport"]
_SHOP_OWN = ["a bakery", "a bike shop", "a florist", "a record shop", "a hardware store"]
_MAYOR = ["the town council", "the parish council", "the city's transport board", "the school governors"]
_NICK = ["Jojo", "Red", "Doc", "Mo", "Ziggy", "Bear"]
_CARCOLOUR = ["a red car", "a silver car", "a dark green car", "a white car", "a blue car"]
_TEAMROLE = ["captain", "vice-captain", "goalkeeper", "coach's assistant", "team manager"]
_SEAT = ["row F seat 12", "the north stand", "block 114", "the family enclosure", "row B seat 3"]
_SONGS = ["a song about the sea", "a lullaby", "a protest song", "a wedding song", "a jingle"]
_CUISINE = ["Ethiopian food", "Georgian food", "Peruvian food", "Korean barbecue", "Sichuan food"]
_CELEB = ["a famous chef", "an Olympic rower", "a film director", "a Nobel laureate", "a rock star"]
_SNEAKERS = ["Air Max", "Stan Smiths", "Converse high-tops", "New Balance 990s", "Vans"]
_VINYL = ["Miles Davis", "Bowie", "Nina Simone", "Kraftwerk", "Fela Kuti"]
_POEMS = ["the moon", "a lost dog", "winter", "the harbour", "the grandmother"]
_WEDDINGS = [
    "a cousin's wedding",
    "a friend's wedding in Crete",
    "a colleague's wedding",
    "a school friend's wedding",
]
_RIVERS = ["the Danube", "the Wye", "the Dordogne", "the Spey", "the Soca"]
_WINES = ["a Rioja", "a Barolo", "a Riesling", "a Malbec", "a Chablis"]
_DONATE = ["Oxfam", "the RNLI", "a cancer charity", "Médecins Sans Frontières", "a local shelter"]
_FOLLOWS = ["a baking account", "a gaming streamer", "a travel vlogger", "a gardening account", "a comedian"]
_STREAMS = ["Netflix", "Disney+", "a BBC iPlayer series", "Apple TV", "Prime Video"]
_ROOMS = ["the kitchen", "the bathroom", "the spare room", "the hallway", "the attic"]
_CERT_NO = ["an old knee injury", "a bad back", "hay fever", "migraines", "asthma"]

KINDS_ROUND3: dict[str, tuple[bool, list[str], tuple[str, ...]]] = dict(KINDS_ROUND2)
KINDS_ROUND3.update({
    "plumber": (True, _PLUMBER, ("{n}'s plumber is {v}.", "{n} calls {v} when a pipe leaks.",
                                 "{n} uses {v} for plumbing jobs.", "{n} found a new plumber: {v}.")),
    "electrician": (True, _ELECTRICIAN, ("{n}'s electrician is {v}.", "{n} has {v} do the wiring.",
                                         "{n} rings {v} for electrical work.")),
    "cleaner": (True, _CLEANER, ("{n}'s cleaner is {v}.", "{n}'s house is cleaned by {v}.",
                                 "{n} hired {v} to clean the flat.", "{v} cleans for {n} on Fridays.")),
    "gardener": (True, _GARDENER, ("{n}'s gardener is {v}.", "{n}'s garden is kept by {v}.",
                                   "{n} pays {v} to mow the lawn.")),
    "tailor": (True, _TAILOR, ("{n}'s tailor is {v}.", "{n} has suits altered by {v}.",
                               "{n} takes clothes to {v} for alterations.")),
    "credit_card": (True, _VENDOR_CARD, ("{n} pays with {v}.", "{n}'s credit card is {v}.",
                                         "{n} cancelled the old card and uses {v}.")),
    "mortgage": (True, _MORTGAGE, ("{n}'s mortgage is with {v}.", "{n} remortgaged with {v}.",
                                   "{n}'s home loan comes from {v}.")),
    "golf_handicap": (True, _HANDICAP, ("{n}'s golf handicap is {v}.", "{n} plays golf off {v}.",
                                        "{n} got the handicap down to {v}.")),
    "marathon_pb": (True, _PB, ("{n}'s marathon best is {v}.", "{n} ran a personal best of {v} in the marathon.",
                                "{n}'s fastest marathon took {v}.")),
    "height": (True, _HEIGHT, ("{n} is {v} tall.", "{n}'s height is {v}.", "{n} measures {v}.")),
    "weight": (True, _WEIGHT, ("{n} weighs {v}.", "{n}'s weight is {v}.", "{n} is down to {v}.")),
    "belt": (True, _BELT, ("{n} has {v} in karate.", "{n} earned {v} at the dojo.", "{n}'s karate grade is {v}.")),
    "shirt_number": (True, _SHIRT, ("{n} wears number {v} for the club.", "{n}'s shirt number is {v}.",
                                    "{n} plays in the number {v} shirt.")),
    "school_year": (True, _GRADE, ("{n} is in {v}.", "{n} moved up to {v}.", "{n}'s class at school is {v}.")),
    "rent": (True, _RENT, ("{n} pays {v} in rent.", "{n}'s rent is {v}.", "{n}'s rent went up to {v}.")),
    "postcode": (True, _POSTCODE, ("{n}'s postcode is {v}.", "{n}'s post goes to {v}.",
                                   "{n} gave {v} as a postcode.")),
    "timezone": (True, _TIMEZONE, ("{n} works on {v}.", "{n}'s time zone is {v}.", "{n} keeps {v} hours.")),
    "handle": (True, _HANDLE, ("{n}'s username is {v}.", "{n} posts as {v}.", "{n}'s handle online is {v}.")),
    "coffee_order": (True, _COFFEE, ("{n}'s usual coffee order is {v}.", "{n} always orders {v}.",
                                     "{n}'s coffee of choice is {v}.")),
    "drink": (True, _DRINK, ("{n}'s drink is {v}.", "At the bar {n} orders {v}.", "{n}'s usual tipple is {v}.")),
    "fav_author": (True, _AUTHOR, ("{n}'s favourite author is {v}.", "{n} rates {v} above every other writer.",
                                   "{n}'s best-loved novelist is {v}.")),
    "watch": (True, _WATCH, ("{n} wears {v}.", "{n}'s watch is {v}.", "{n} straps on {v} every day.")),
    "scent": (True, _SCENT, ("{n}'s perfume is {v}.", "{n} wears {v} as a signature scent.",
                             "{n} smells of {v} these days.")),
    "band_in": (True, _BAND_IN, ("{n} plays in {v}.", "{n} is the bassist of {v}.", "{n} joined {v} as a guitarist.")),
    "stage_role": (True, _ROLE_PLAY, ("{n} is playing {v} in the new production.", "{n} was cast as {v}.",
                                      "{n}'s part in the play is {v}.")),
    "thesis": (True, _THESIS, ("{n}'s thesis is about {v}.", "{n} is researching {v} for a doctorate.",
                               "{n}'s dissertation topic is {v}.")),
    "ward": (True, _WARD, ("{n} works on {v}.", "{n} is a nurse on {v}.", "{n} was moved to {v}.")),
    "bus_route": (True, _ROUTE, ("{n} drives {v}.", "{n}'s bus route is {v}.", "{n} was put on {v}.")),
    "class_taught": (True, _CLASS, ("{n} teaches {v}.", "{n}'s class this year is {v}.", "{n} took over {v}.")),
    "beat": (True, _BEAT, ("{n} covers {v} for the paper.", "{n}'s beat is {v}.", "{n} reports on {v}.")),
    "shop_owned": (True, _SHOP_OWN, ("{n} runs {v}.", "{n} owns {v} on the high street.", "{n} opened {v}.")),
    "seat_on": (True, _MAYOR, ("{n} chairs {v}.", "{n} was elected to lead {v}.", "{n} is the head of {v}.")),
    "nickname": (True, _NICK, ("{n}'s nickname is {v}.", "Everyone calls {n} {v}.", "{n} goes by {v}.")),
    "car_colour": (True, _CARCOLOUR, ("{n} has {v}.", "{n} parks {v} outside.", "{n} resprayed the car: {v}.")),
    "team_role": (True, _TEAMROLE, ("{n} is the {v} of the hockey team.", "{n} was made {v}.",
                                    "On the team, {n} is {v}.")),
    "season_seat": (True, _SEAT, ("{n}'s season ticket is for {v}.", "{n} sits in {v} at home games.",
                                  "{n} moved the season ticket to {v}.")),
    # many-valued
    "songs": (False, _SONGS, ("{n} wrote {v}.", "{n} composed {v}.", "{n} recorded {v}.")),
    "cuisines": (False, _CUISINE, ("{n} has tried {v}.", "{n} tasted {v} for the first time.", "{n} ate {v}.")),
    "met": (False, _CELEB, ("{n} met {v}.", "{n} shook hands with {v}.", "{n} had dinner with {v}.")),
    "sneakers": (False, _SNEAKERS, ("{n} owns {v}.", "{n} bought a pair of {v}.", "{n} wears {v} sometimes.")),
    "vinyl": (False, _VINYL, ("{n} has records by {v}.", "{n} bought a {v} LP.", "{n} spins {v} on vinyl.")),
    "poems": (False, _POEMS, ("{n} wrote a poem about {v}.", "{n} published verses on {v}.")),
    "weddings": (False, _WEDDINGS, ("{n} went to {v}.", "{n} was a guest at {v}.", "{n} gave a speech at {v}.")),
    "rivers": (False, _RIVERS, ("{n} kayaked {v}.", "{n} paddled down {v}.", "{n} swam in {v}.")),
    "wines": (False, _WINES, ("{n} enjoyed {v}.", "{n} bought a case of {v}.", "{n} opened {v} for guests.")),
    "donates": (False, _DONATE, ("{n} donates to {v}.", "{n} gives money to {v}.", "{n} sponsors {v}.")),
    "follows": (False, _FOLLOWS, ("{n} follows {v}.", "{n} is subscribed to {v}.", "{n} watches {v} online.")),
    "streams": (False, _STREAMS, ("{n} streams {v}.", "{n} pays for {v}.", "{n} binge-watched {v}.")),
    "renovated": (False, _ROOMS, ("{n} renovated {v}.", "{n} repainted {v}.", "{n} redid {v}.")),
    "conditions": (False, _CERT_NO, ("{n} lives with {v}.", "{n} has {v}.", "{n} takes medicine for {v}.")),
})  # fmt: skip

# Sentence shapes laid over any template: a leading clause or a trailing remark.
PREFIXES = ("In {y}, ", "Since {y}, ", "As of {y}, ", "Recently, ", "Last {s}, ", "Apparently, ",
            "For the record, ", "Good news: ", "Update: ", "Earlier this year, ", "Back in {y}, ")  # fmt: skip
SUFFIXES = (" now.", " for now.", ", as far as I know.", ", which surprised everyone.", ", at last.",
            " since {y}.", ", according to a friend.", " and is happy with it.")  # fmt: skip
_SEASONS = ("spring", "summer", "autumn", "winter")


def shaped(rng: random.Random, text: str) -> str:
    """``text`` with, sometimes, a leading clause and/or a trailing remark (``PREFIXES``, ``SUFFIXES``)."""
    y, season = str(rng.randrange(2010, 2026)), rng.choice(_SEASONS)
    if rng.random() < 0.25 and text.endswith("."):
        text = text[:-1] + rng.choice(SUFFIXES).format(y=y)
    if rng.random() < 0.3:
        head = rng.choice(PREFIXES).format(y=y, s=season)
        first = text.split(" ", 1)[0]
        text = head + (
            text
            if first[:1].isupper() and first not in ("Home", "Above", "If")
            else text[:1].lower() + text[1:]
        )
    return text


_FIRST = ["Aurel", "Brigid", "Cato", "Delphine", "Eamon", "Freja", "Gunnar", "Halima", "Ignatius", "Jolene",
          "Kasimir", "Linnea", "Magnus", "Noor", "Ottilie", "Piet", "Rosalind", "Stellan", "Thandiwe", "Ulrich",
          "Viveka", "Wilbur", "Ximena", "Yannick", "Zelda", "Anselm", "Bettina", "Conall", "Dagny", "Evander"]  # fmt: skip
_SYL = ["ar", "bel", "cor", "dan", "est", "fal", "gor", "hen", "ist", "jor", "kal", "lun", "mor", "nev", "ost",
        "pra", "quin", "ros", "sut", "tam", "ulv", "ver", "wyn", "yor", "zan"]  # fmt: skip


def _surname(rng: random.Random) -> str:
    return "".join(rng.sample(_SYL, 2)).capitalize() + rng.choice(["", "s", "er", "ova", "sen", "ez"])


def build(seed: int = 7, persons: int = 400, *, round: int = 1) -> list[TrainStatement]:
    """Per person: four to seven kinds, two to four statements of each (values differ).

    ``round`` 1: ``KINDS`` as written (the many-valued veto's data, unchanged since the
    first round); 2: ``KINDS_ROUND2`` (3: ``KINDS_ROUND3``), with ``shaped``'s leading clauses and trailing
    remarks over some statements (the kind profiles' data).
    """
    table = {1: KINDS, 2: KINDS_ROUND2}.get(round, KINDS_ROUND3)
    rng = random.Random(seed)
    shape_rng = random.Random(seed + 1)  # its own stream: the draws of ``rng`` do not depend on shapes
    out: list[TrainStatement] = []
    seen: set[str] = set()
    kinds = sorted(table)
    for p in range(persons):
        while True:
            name = f"{rng.choice(_FIRST)} {_surname(rng)}"
            if name not in seen:
                seen.add(name)
                break
        for kind in rng.sample(kinds, rng.randint(4, 7)):
            exclusive, values, templates = table[kind]
            for order, v in enumerate(rng.sample(values, min(len(values), rng.randint(2, 4)))):
                text = rng.choice(templates).format(n=name, v=v)
                out.append(
                    TrainStatement(shaped(shape_rng, text) if round > 1 else text, p, kind, exclusive, order)
                )
    return out
