"""Generate the bundled NER sample: ``onlstm_tasks/sample_data/ner/{train,validation,test}.txt``.

Every name and sentence here is invented. Sentences come from news-like templates filled with invented
people, organisations, places and events; the output is CoNLL-2003-like (``token TAG`` per line, IOB2 tags
PER/ORG/LOC/MISC, blank line between sentences). A fixed share of every name list is held out of the
training split and used only in validation/test, so unseen names must be recognised from context and
spelling. The generator is deterministic: running it again rewrites the files byte for byte.

    python scripts/make_sample_data.py            # rewrite the bundled files
    python scripts/make_sample_data.py --out DIR  # write elsewhere
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from pathlib import Path

SEED = 20240611
SIZES = {"train": 400, "validation": 100, "test": 100}
HELD_OUT = 0.3  # share of every name list never used in train
UNSEEN_RATE = 0.5  # chance that a validation/test name comes from the held-out share
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "onlstm_tasks" / "sample_data" / "ner"

# --- invented names ---------------------------------------------------------------------------------

FIRST_NAMES = """Anika Beno Corvin Dalia Edrik Falla Gisel Havel Ilsa Joran Kesia Lorcan Mirela Nadim Orla Pelle
Quilla Rasmo Selin Tobiah Ulla Varek Wenna Xaver Yelka Zoran Amaru Brisa Cato Delphine Emrys Fenna Goran Halla
Idris Jessamy Kaito Liesel Marten Noor Osric Petra Ravi Sunniva Teodor Undine Vesna Wilmer Ysolde Zelig""".split()

SURNAMES = """Dravetz Marenko Tovalli Quessard Halvorsk Bremmond Castellane Okonvu Ferrandi Lindqvast Moravik
Pellegrane Soderhalm Tannwick Uvarossi Valtonen Wexley Yarrowby Zamfirel Achterberg Belcourt Corrigan Dunstable
Esterhal Fairbrook Grünwald Hollister Ivashenko Jorvane Kettleby Lascelles Mbatheka Norrendal Oyelaran Prischak
Rannveig Stavrou Thistlewood Ulbrecht Vinterlund Whitcombe Xenakides Ysterberg Zoltanek Abernethy Brankovic
Calloway Demirtal Ellingsen""".split()

CITIES = """Ostervale Karamund Lusmark Brennholt Solvenna Dursk Merrowby Qadira Calderwick Vessany Thornmoor Ilvaro
Pentrecast Rhosmark Sarnhelm Tulveda Ambergrove Byrnholm Corsava Delmora Elsmoor Falmirk_Nova Glennagh Hallowmere
Isenport Jarvika Kelmsford Lindavel Morrowdale Nevanlo Port_Selwyn New_Harrowgate San_Orvello Upper_Kesh
Lake_Orvin Fort_Amsel""".split()

COUNTRIES = [  # (country, nationality adjective)
    ("Veltria", "Veltrian"), ("Ardania", "Ardanian"), ("Kostrel", "Kostreli"), ("Pellandor", "Pellandorian"),
    ("Samarkel", "Samarkeli"), ("Luminara", "Luminaran"), ("Orsova", "Orsovan"), ("Taldoria", "Taldorian"),
    ("Brevonia", "Brevonian"), ("Qesmir", "Qesmiri"), ("Harrowland", "Harrowlandic"), ("Ystria", "Ystrian"),
    ("Morvania", "Morvanian"), ("Cadrey", "Cadreyan"), ("Zelvonia", "Zelvonian"), ("Durmand", "Durmandi"),
    ("North_Ardania", "North_Ardanian"), ("Sorvell_Islands", "Sorvellese"), ("Ennavar", "Ennavari"),
    ("Gallovia", "Gallovian"),
]

REGIONS = """Kessel_Valley Northern_Marches Orvin_Basin Tarsk_Peninsula Silverfell_Highlands Amber_Coast
Dunmere_Plains Greywater_Delta Lowen_Hills Estrel_Province""".split()

COMPANY_BASES = """Brellwick Quandor Tarvik Halvane Morrowgate Silvan Kestrow Veloran Corrix Dunmere Ambrell
Fennick Goldharrow Ironvale Jastro Kelvane Lumora Marrick Nordane Obrecht Pallant Quillon Rastor Stellwyn Tamberlin
Ulmont Varrow Wyncott Zephar Aldermoor Bexley_Crane Castor_Hale""".split()

COMPANY_SUFFIXES = """Bank Holdings Systems Group Motors Airways Energy Pharma Telecom Insurance Foods Mining
Partners Logistics Steel Capital Corp Ltd Industries Media""".split()

ACRONYMS = """KTX BRW Q-Tel VMC Norvex OLDA TRN-Ferro ALCO Dravex HXB""".split()

CLUB_PATTERNS = ["{} Rovers", "{} United", "{} Athletic", "FC {}", "Sporting {}", "{} Wanderers", "Real {}"]
MEDIA_PATTERNS = ["{} Herald", "{} Gazette", "{} Tribune", "{} Evening Post", "Radio {}"]
INSTITUTION_PATTERNS = ["University of {}", "Bank of {}", "{} Football Association", "{} Chamber of Commerce"]

EVENT_PATTERNS = ["{} Open", "{} Marathon", "{} Grand Prix", "{} Film Festival", "{} Cup", "{} Regatta"]
EVENT_NAMES = """Winter_Games Harvest_Fair Summit_of_the_Nine Copper_Cup Tidewater_Trophy Northern_Classic
Lantern_Festival Silver_Oar_Race Ironman_Duodecim Festival_of_Lights""".split()
PRODUCTS = """Zephyr_X2 Nova_7 Corrix_Pilot Aurora_S Halcyon Tarvik_Sprint Lumora_One Vantis_Pro Quill_9 Orbital_Lite
Marlin_GT Skylark_3""".split()

TITLES = ["Mr.", "Mrs.", "Ms.", "Dr.", "President", "Minister", "Judge", "Professor", "Coach"]
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
NUMBER_WORDS = "two three four five six seven eight nine ten twelve".split()

# --- templates ----------------------------------------------------------------------------------------
# {SLOT}s expand to one or more tokens: entity slots are tagged, the others are O. Everything else is a
# space-separated token tagged O.

TEMPLATES = [
    "{PER} , chief executive of {COMPANY} , said on {DAY} that the company would cut {NUM} jobs .",
    "{COMPANY} shares rose {DEC} percent to {DEC} {CURRENCY} in early trading in {CITY} .",
    "{PER} scored twice as {CLUB} beat {CLUB} {SCORE} on {DAY} .",
    "The {NAT} government said on {DAY} it would hold talks with {COUNTRY} next month .",
    "Police in {CITY} arrested {NUM} people after protests outside the offices of {COMPANY} .",
    "{CITY} is expected to host the {EVENT} in {YEAR} .",
    "Shares closed higher on {DAY} after a quiet session in which {NUM} million shares changed hands .",
    "The company did not give details of the deal , which is expected to close in {MONTH} .",
    "Inflation slowed to {DEC} percent in {MONTH} , the lowest level since {YEAR} .",
    "{COMPANY} said it had agreed to buy {COMPANY} for {NUM} million {CURRENCY} .",
    "{PER} , who won the {EVENT} last year , will miss the race in {CITY} .",
    '" We are very happy with the result , " {PER} told reporters in {CITY} .',
    "{TITLE} {SURNAME} said the talks in {CITY} had been useful .",
    "{NAT} striker {PER} joined {CLUB} on a {NUMWORD}-year contract .",
    "The {PRODUCT} will go on sale in {COUNTRY} in {MONTH} , {COMPANY} said .",
    "{RANK} {PER} ( {COUNTRY} ) {TIME}",
    "{DATELINE} {DATE}",
    "{COMPANY} reported a net profit of {DEC} million {CURRENCY} for the {QUARTER} quarter .",
    "Talks between {COUNTRY} and {COUNTRY} ended without agreement on {DAY} .",
    "{PER} was appointed finance minister of {COUNTRY} on {DAY} .",
    "Results of the {EVENT} on {DAY} :",
    "{CLUB} {SMALL} {CLUB} {SMALL}",
    "A spokesman for {ORG} declined to comment .",
    "Heavy rain caused flooding in parts of the {REGION} on {DAY} .",
    "{NAT} and {NAT} officials met in {CITY} to discuss trade .",
    "The {EVENT} drew more than {NUM} visitors this year .",
    "{PER} and {PER} will meet in the final on {DAY} .",
    "Analysts at {COMPANY} expect growth of {DEC} percent next year .",
    "Born in {CITY} , {SURNAME} moved to {COUNTRY} as a child .",
    "{COMPANY} launched the {PRODUCT} at a press event in {CITY} on {DAY} .",
    "Prices fell sharply on {DAY} as traders sold ahead of the holiday .",
    "{NUM} people were injured when a bus overturned near {CITY} , police said .",
    "The {NAT} coach , {PER} , named a squad of {NUM} players for the {EVENT} .",
    "{SURNAME} told the {MEDIA} that he would stand again in {YEAR} .",
    "The central bank of {COUNTRY} left interest rates unchanged at {DEC} percent .",
    "{COMPANY} , based in {CITY} , employs about {NUM} people .",
    "Voters in the {REGION} go to the polls on {DAY} .",
    '{PER} said : " It was a difficult week for everyone . "',
    "Fans of {CLUB} celebrated in the streets of {CITY} until late on {DAY} .",
    "He said the plan would be presented to parliament in {MONTH} .",
    "{PER} resigned as chairman of {ORG} after {NUMWORD} years .",
    "{COUNTRY} won the {EVENT} for the first time since {YEAR} .",
    "The {PRODUCT} sold {NUM} units in its first week , according to {COMPANY} .",
    "Trading was thin ahead of the {EVENT} , dealers said .",
    "{COMPANY} and {COMPANY} will merge to form one of the largest groups in {COUNTRY} .",
    "According to the {MEDIA} , {SURNAME} is expected to leave {CLUB} in {MONTH} .",
    "It was not immediately clear how many people had been affected .",
    "Officials from the {ORG} visited {CITY} and {CITY} last week .",
    "{COMPANY} wins {NUM} million {CURRENCY} contract in {COUNTRY}",
    "{CLUB} v {CLUB}",
    "Reporting by {PER}",
]


class Pools:
    """Every name list split once into a seen share (all splits) and a held-out share (validation/test)."""

    def __init__(self, rng: random.Random) -> None:
        self.lists: dict[str, tuple[list, list]] = {}
        for key, items in [
            ("first", FIRST_NAMES), ("surname", SURNAMES), ("city", CITIES), ("country", COUNTRIES),
            ("region", REGIONS), ("company", COMPANY_BASES), ("acronym", ACRONYMS), ("event", EVENT_NAMES),
            ("product", PRODUCTS),
        ]:
            items = list(items)
            rng.shuffle(items)
            cut = round(len(items) * (1 - HELD_OUT))
            self.lists[key] = (items[:cut], items[cut:])

    def pick(self, key: str, rng: random.Random, unseen_rate: float):
        seen, unseen = self.lists[key]
        pool = unseen if rng.random() < unseen_rate else seen
        return rng.choice(pool).replace("_", " ") if isinstance(pool[0], str) else rng.choice(pool)


def entity_slots(pools: Pools, rng: random.Random, unseen: float) -> dict[str, Callable[[], tuple[str, str]]]:
    """Slot name -> function returning (text, entity type); type "O" for plain words."""

    def pick(key: str):
        return pools.pick(key, rng, unseen)

    def person() -> str:
        first, last = pick("first"), pick("surname")
        r = rng.random()
        if r < 0.12:
            return f"{first} {rng.choice('ABCDEFGHJKLMNPRSTW')}. {last}"
        if r < 0.18:
            return f"{first} {pick('surname')}-{last}"
        return f"{first} {last}"

    def country() -> tuple[str, str]:
        name, adjective = pick("country")
        return name.replace("_", " "), adjective.replace("_", " ")

    def company() -> str:
        r = rng.random()
        if r < 0.15:
            return pick("acronym")
        if r < 0.25:
            return f"{pick('acronym')} {rng.choice(COMPANY_SUFFIXES)}"
        return f"{pick('company')} {rng.choice(COMPANY_SUFFIXES)}"

    def organisation() -> str:
        r = rng.random()
        if r < 0.5:
            return company()
        place = pick("city") if rng.random() < 0.6 else country()[0]
        return rng.choice(INSTITUTION_PATTERNS).format(place)

    def event() -> str:
        if rng.random() < 0.5:
            return pick("event")
        place = pick("city") if rng.random() < 0.5 else country()[0]
        return rng.choice(EVENT_PATTERNS).format(place)

    return {
        "PER": lambda: (person(), "PER"),
        "SURNAME": lambda: (pick("surname"), "PER"),
        "COMPANY": lambda: (company(), "ORG"),
        "ORG": lambda: (organisation(), "ORG"),
        "CLUB": lambda: (rng.choice(CLUB_PATTERNS).format(pick("city")), "ORG"),
        "MEDIA": lambda: (rng.choice(MEDIA_PATTERNS).format(pick("city")), "ORG"),
        "CITY": lambda: (pick("city"), "LOC"),
        "DATELINE": lambda: (pick("city").upper(), "LOC"),
        "COUNTRY": lambda: (country()[0], "LOC"),
        "REGION": lambda: (pick("region"), "LOC"),
        "NAT": lambda: (country()[1], "MISC"),
        "EVENT": lambda: (event(), "MISC"),
        "PRODUCT": lambda: (pick("product"), "MISC"),
        "TITLE": lambda: (rng.choice(TITLES), "O"),
        "DAY": lambda: (rng.choice(DAYS), "O"),
        "MONTH": lambda: (rng.choice(MONTHS), "O"),
        "YEAR": lambda: (str(rng.randint(1979, 2031)), "O"),
        "DATE": lambda: (f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "O"),
        "NUM": lambda: (rng.choice([str(rng.randint(2, 99)), str(rng.randint(100, 950)), f"{rng.randint(1, 9)},{rng.randint(0, 999):03d}"]), "O"),
        "NUMWORD": lambda: (rng.choice(NUMBER_WORDS), "O"),
        "SMALL": lambda: (str(rng.randint(0, 5)), "O"),
        "SCORE": lambda: (f"{rng.randint(1, 6)}-{rng.randint(0, 3)}", "O"),
        "DEC": lambda: (f"{rng.randint(0, 40)}.{rng.randint(0, 99):d}", "O"),
        "CURRENCY": lambda: (rng.choice(["crowns", "marks", "dollars", "euros"]), "O"),
        "QUARTER": lambda: (rng.choice(["first", "second", "third", "fourth"]), "O"),
        "RANK": lambda: (f"{rng.randint(1, 12)}.", "O"),
        "TIME": lambda: (f"{rng.randint(1, 3)}:{rng.randint(0, 59):02d}.{rng.randint(0, 99):02d}", "O"),
    }


def render(template: str, slots: dict[str, Callable[[], tuple[str, str]]]) -> list[tuple[str, str]]:
    """One sentence as (token, IOB2 tag) pairs."""
    out: list[tuple[str, str]] = []
    for piece in template.split(" "):
        if "{" not in piece:
            out.append((piece, "O"))
            continue
        prefix, rest = piece.split("{", 1)
        slot, suffix = rest.split("}", 1)
        text, kind = slots[slot]()
        if prefix or suffix:  # a slot glued to text, e.g. "{NUMWORD}-year": one plain token
            out.append((prefix + text + suffix, "O"))
            continue
        for i, token in enumerate(text.split(" ")):
            out.append((token, "O" if kind == "O" else f"{'B' if i == 0 else 'I'}-{kind}"))
    return out


def generate(seed: int = SEED) -> dict[str, list[list[tuple[str, str]]]]:
    rng = random.Random(seed)
    pools = Pools(rng)
    splits = {}
    for split, size in SIZES.items():
        slots = entity_slots(pools, rng, unseen=0.0 if split == "train" else UNSEEN_RATE)
        # every template at least once per split, the rest drawn at random
        templates = TEMPLATES[:size] + [rng.choice(TEMPLATES) for _ in range(size - len(TEMPLATES))]
        rng.shuffle(templates)
        splits[split] = [render(t, slots) for t in templates]
    return splits


def to_conll(sentences: list[list[tuple[str, str]]]) -> str:
    return "\n".join("".join(f"{token} {tag}\n" for token, tag in sentence) for sentence in sentences)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: the package's)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, sentences in generate(args.seed).items():
        path = args.out / f"{split}.txt"
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(to_conll(sentences))
        print(f"{path}: {len(sentences)} sentences")


if __name__ == "__main__":
    main()
