"""Generate the bundled aspect-sentiment sample: ``onlstm_tasks/sample_data/absa/Gadgets_{Train,Test}.xml``.

Every sentence here is invented: short reviews of invented gadgets and restaurants, written in the
SemEval-2014 Task 4 XML format (``<sentence id><text>..</text><aspectTerms><aspectTerm term= polarity= from=
to=/>..</aspectTerms></sentence>``, ``from``/``to`` character offsets with ``text[from:to] == term``).

Sentences are built from clauses, one per aspect term; a clause's polarity comes from the opinion words next to
its aspect (``the {A} is sharp``, ``I hate the {A}``, ``the {A} is not reliable at all``, neutral facts such as
``I asked about the {A}``). Sentences hold one aspect, two of different polarity (``The screen is gorgeous but
the battery life is terrible.``), two or three of the same polarity, or none; a few single aspects are
``conflict`` (praised and criticised at once), which readers drop by default. A fixed share of the aspect terms
is held out of the training file and used only in the test file, so unseen terms must be classified from their
context. The generator is deterministic: running it again rewrites the files byte for byte.

    python scripts/make_absa_sample.py            # rewrite the bundled files
    python scripts/make_absa_sample.py --out DIR  # write elsewhere
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

SEED = 20240612
SIZES = {"Train": 300, "Test": 100}  # sentences per file (the file names carry the split)
FIRST_ID = {"Train": 1001, "Test": 5001}
HELD_OUT = 0.3  # share of the aspect terms never used in train
UNSEEN_RATE = 0.5  # chance that a test aspect comes from the held-out share
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "onlstm_tasks" / "sample_data" / "absa"

# --- invented products and places -----------------------------------------------------------------------

PRODUCTS = ["Zentrova X3", "Quillon Pad 2", "Halvane Buds", "Corrix Note 14", "Lumora Watch S", "Brellwick One",
            "Tarvik Mini", "Kestrow Book Air", "Veloran Tab 8", "Ambrell Pods Pro"]
PLACES = ["Casa Morvella", "The Brass Lantern", "Olive & Ember", "Noodle Harbour", "Café Lindqvist",
          "Pelle's Kitchen", "The Copper Ladle", "Saffron Yard", "Bistro Tannwick", "Little Orvin"]

# --- aspect groups: (domain, aspect terms, positive words, negative words) -------------------------------

GROUPS: dict[str, tuple[str, list[str], list[str], list[str]]] = {
    "screen": ("gadget", ["screen", "display", "touch screen", "camera", "front camera", "screen resolution",
                          "webcam", "colours", "brightness"],
               ["sharp", "bright", "crisp", "clear", "vivid", "stunning"],
               ["dim", "blurry", "grainy", "dull", "washed out", "faded"]),
    "audio": ("gadget", ["speakers", "sound quality", "microphone", "headphones", "noise cancelling", "bass"],
              ["clear", "rich", "powerful", "balanced", "crisp", "immersive"],
              ["tinny", "muffled", "distorted", "harsh", "crackly", "weak"]),
    "performance": ("gadget", ["processor", "battery life", "battery", "charging speed", "Wi-Fi connection",
                               "software", "operating system", "fingerprint reader", "apps", "Bluetooth pairing",
                               "boot time", "graphics card", "memory", "updates"],
                    ["fast", "reliable", "smooth", "responsive", "long-lasting", "snappy"],
                    ["slow", "laggy", "unreliable", "sluggish", "buggy", "unstable"]),
    "build": ("gadget", ["keyboard", "case", "hinge", "buttons", "build quality", "charger", "charging cable",
                         "USB-C port", "design", "strap", "lid", "stand", "keys", "trackpad", "ear tips", "packaging"],
              ["sturdy", "solid", "comfortable", "elegant", "well made", "sleek"],
              ["flimsy", "cheap", "fragile", "awkward", "wobbly", "clunky"]),
    "support": ("gadget", ["customer service", "support team", "warranty", "manual", "return policy", "setup guide",
                           "repair service", "help line"],
                ["helpful", "clear", "generous", "friendly", "patient", "thorough"],
                ["useless", "confusing", "unhelpful", "frustrating", "rude", "vague"]),
    "shipping": ("gadget", ["delivery time", "shipping", "delivery", "courier", "order tracking"],
                 ["quick", "fast", "efficient", "smooth", "painless"],
                 ["slow", "painfully long", "chaotic", "unreliable", "endless"]),
    "gadget_value": ("gadget", ["price", "cost", "subscription fee", "value for money", "price tag", "trade-in offer"],
                     ["reasonable", "fair", "affordable", "very competitive"],
                     ["steep", "outrageous", "far too high", "hard to justify"]),
    "food": ("restaurant", ["food", "pizza", "pasta", "sushi", "fish & chips", "dessert", "soup", "fries", "bread",
                            "steak", "curry", "noodles", "salad", "coffee", "portions", "chef's special",
                            "lamb stew", "tiramisu", "dumplings", "house wine", "breakfast menu"],
             ["delicious", "tasty", "fresh", "flavorful", "perfectly cooked", "mouth-watering"],
             ["bland", "stale", "cold", "greasy", "overcooked", "soggy"]),
    "staff": ("restaurant", ["service", "staff", "waiter", "waitress", "manager", "bartender", "host",
                             "kitchen staff", "owner", "delivery driver"],
              ["friendly", "attentive", "welcoming", "professional", "helpful", "polite"],
              ["rude", "inattentive", "dismissive", "unfriendly", "careless", "impatient"]),
    "place": ("restaurant", ["atmosphere", "decor", "music", "outdoor seating", "dining room", "terrace", "tables",
                             "restroom", "view", "lighting", "ambience", "parking"],
              ["cozy", "charming", "lovely", "relaxing", "pleasant", "inviting"],
              ["noisy", "cramped", "dirty", "gloomy", "loud", "shabby"]),
    "restaurant_value": ("restaurant", ["price", "prices", "bill", "delivery fee", "set menu price", "corkage fee"],
                         ["reasonable", "fair", "affordable", "very competitive"],
                         ["steep", "outrageous", "far too high", "hard to justify"]),
    "timing": ("restaurant", ["delivery time", "wait", "waiting time", "reservation system", "online ordering",
                              "delivery", "table booking"],
               ["quick", "fast", "efficient", "smooth", "painless"],
               ["slow", "painfully long", "chaotic", "unreliable", "endless"]),
}
PLURAL = {"speakers", "headphones", "colours", "apps", "updates", "buttons", "keys", "ear tips", "fries", "noodles",
          "portions", "dumplings", "tables", "prices"}
DOMAIN_GROUPS = {d: [g for g, spec in GROUPS.items() if spec[0] == d] for d in ("gadget", "restaurant")}

GOOD = ["great", "excellent", "fantastic", "superb", "impressive", "wonderful", "outstanding", "amazing"]
BAD = ["terrible", "awful", "disappointing", "poor", "horrible", "mediocre", "dreadful", "pathetic"]
SO_SO = ["okay", "average", "standard", "acceptable", "ordinary", "about what you would expect"]
INTENSIFIERS = ["really", "very", "incredibly", "quite", "so", "extremely"]

# --- clauses: {A} is the aspect, {BE} agrees with it; {POS}/{NEG} group words ({POSW}/{NEGW}: one-word ones),
# {GOOD}/{BAD}/{SOSO} generic, {INT} an intensifier

CLAUSES = {
    "positive": [
        "the {A} {BE} {POS}", "the {A} {BE} {INT} {POSW}", "the {A} {BE} {POS} and {POS}", "I love the {A}",
        "I really liked the {A}", "the {A} {BE} {GOOD}", "the {A} exceeded my expectations",
        "the {A} {BE} absolutely {GOOD}", "you will enjoy the {A}", "no complaints about the {A}",
        "the {A} {BE} a real highlight", "the {A} impressed me", "the {A} {BE} {GOOD}, {POS} and {POS}",
    ],
    "negative": [
        "the {A} {BE} {NEG}", "the {A} {BE} {INT} {NEGW}", "the {A} {BE} {NEG} and {NEG}", "I hate the {A}",
        "I really disliked the {A}", "the {A} {BE} {BAD}", "the {A} {BE} a huge disappointment",
        "the {A} let me down", "the {A} {BE} not {POS} at all", "stay away from the {A}",
        "I had nothing but trouble with the {A}", "the {A} {BE} {BAD}, {NEG} and {NEG}",
    ],
    "neutral": [
        "the {A} {BE} {SOSO}", "I asked about the {A}", "the {A} {BE} similar to what I had before",
        "they changed the {A} last year", "I did not pay much attention to the {A}", "my friend mentioned the {A}",
        "the {A} {BE} mentioned in every review", "I have no strong feelings about the {A}",
        "the {A} {BE} neither good nor bad", "I will write more about the {A} later", "the {A} {BE} {SOSO}",
    ],
    "conflict": [
        "the {A} {BE} {POS} but {NEG}", "the {A} {BE} {POS} at first and then {NEG}",
        "I love and hate the {A} in equal measure", "the {A} {BE} both {GOOD} and {BAD}",
    ],
}
NEUTRAL_BY_GROUP = {
    "screen": ["I mostly use the {A} for video calls", "the {A} {BE} the same as on the previous model"],
    "audio": ["I tested the {A} with a podcast", "the {A} {BE} the same as on the previous model"],
    "performance": ["I checked the {A} before buying", "the {A} {BE} listed on the box"],
    "build": ["the {A} comes in grey or silver", "the {A} {BE} on the left side"],
    "support": ["I read about the {A} on the website", "the {A} {BE} handled by a partner company"],
    "shipping": ["I paid extra for the {A}", "the {A} {BE} explained on their website"],
    "gadget_value": ["the {A} {BE} the same in every shop", "I compared the {A} with other models"],
    "food": ["we ordered the {A} to share", "my friend had the {A}", "the {A} came with a side of rice"],
    "staff": ["the {A} brought the menus", "we asked the {A} about the specials"],
    "place": ["we sat near the {A}", "the {A} {BE} on the first floor"],
    "restaurant_value": ["the {A} {BE} printed on the menu", "we split the {A} four ways"],
    "timing": ["we asked about the {A}", "the {A} {BE} explained on their website"],
}
SHORT = {  # sentence-initial aspect, single-aspect sentences only
    "positive": ["{A}: {POS}!", "{A}: {GOOD}.", "{A} - {POS} and {POS}."],
    "negative": ["{A}: {NEG}.", "{A}? {BAD}.", "{A} - {NEG} and {NEG}!"],
    "neutral": ["{A}: {SOSO}.", "{A}: nothing to report."],
}

# --- sentence frames ----------------------------------------------------------------------------------------

SINGLE = ["{C}.", "{C}.", "{C}!", "Honestly, {C}.", "After two weeks, {C}.", "{C}, in my opinion.",
          "Overall, {C}.", "I have to say {C}.", "{C} (as far as I can tell).", "To be fair, {C}...",
          'My review in one line: "{C}."']
SINGLE_BY_DOMAIN = {"gadget": ["As for the {PRODUCT}, {C}.", "I bought the {PRODUCT} in {MONTH} and {C}."],
                    "restaurant": ["At {PLACE}, {C}.", "We went to {PLACE} on a {DAY} and {C}."]}
CONTRAST = ["{C1} but {C2}.", "{C1}, but {C2}!", "{C1}; however, {C2}.", "While {C1}, {C2}.",
            "{C1}, although {C2}.", "{C1}, whereas {C2}.", "{C1} - but {C2}."]
SAME = ["{C1} and {C2}.", "{C1}, and {C2} too.", "{C1}; also, {C2}."]
TRIPLE = ["{C1}, {C2}, and {C3}.", "{C1}; {C2}; {C3}."]
NO_ASPECT = {
    "gadget": ["I bought the {PRODUCT} in {MONTH}.", "Would I buy the {PRODUCT} again? Maybe.",
               "Overall, I am very happy with my purchase!", "My brother has the same model.",
               "I ordered the {PRODUCT} online on a {DAY}.", "What a waste of money.", "Five stars!",
               "I replaced my old phone with the {PRODUCT}."],
    "restaurant": ["We went to {PLACE} on a {DAY} evening.", "This was my second visit to {PLACE}.",
                   "We were a group of {NUMWORD}.", "I would not recommend {PLACE} to anyone.",
                   "We will definitely be back!", "It was my sister's birthday.", "Read on for the details..."],
}
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
NUMWORDS = "three four five six seven eight".split()

# --- what the sentences hold -------------------------------------------------------------------------------

KINDS = [("none", 0.06), ("single", 0.56), ("contrast", 0.26), ("same", 0.08), ("triple", 0.04)]
SINGLE_POLARITY = [("positive", 0.42), ("negative", 0.3), ("neutral", 0.22), ("conflict", 0.06)]
CONTRAST_PAIRS = [(("positive", "negative"), 0.6), (("positive", "neutral"), 0.2), (("negative", "neutral"), 0.2)]
SAME_POLARITY = [("positive", 0.55), ("negative", 0.35), ("neutral", 0.1)]
SHORT_RATE = 0.1  # single aspects written "Battery life: terrible."

_SLOT = re.compile(r"(\{[A-Z0-9]+\})")
_SENTENCE_START = re.compile(r'^[a-z]|(?<=: ")[a-z]')  # the text's first letter, a quoted sentence's


def quota(rng: random.Random, options: list[tuple], n: int) -> list:
    """``n`` draws whose counts follow the weights as closely as whole numbers allow (largest remainders), in
    random order: small files keep the intended class shares instead of drifting with the luck of the draw."""
    exact = [w * n for _, w in options]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(options)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[:n - sum(counts)]:
        counts[i] += 1
    out = [option for (option, _), k in zip(options, counts) for _ in range(k)]
    rng.shuffle(out)
    return out


class Terms:
    """Every group's aspect terms, a share ``HELD_OUT`` of them held out of train."""

    def __init__(self, rng: random.Random) -> None:
        held: dict[str, bool] = {}  # a term shared by two groups ("price") is held out of both or of neither
        for _, terms, _, _ in GROUPS.values():
            terms = list(terms)
            rng.shuffle(terms)
            target, n_held = max(1, round(len(terms) * HELD_OUT)), sum(held.get(t, False) for t in terms)
            for term in terms:
                if term not in held:
                    held[term] = n_held < target
                    n_held += held[term]
        self.pools = {g: ([t for t in terms if not held[t]], [t for t in terms if held[t]])
                      for g, (_, terms, _, _) in GROUPS.items()}
        for group, (seen, unseen) in self.pools.items():
            assert seen and unseen, f"group {group}: needs seen and held-out terms"

    def pick(self, group: str, rng: random.Random, unseen_rate: float, avoid: set[str]) -> str:
        seen, unseen = self.pools[group]
        pool = unseen if rng.random() < unseen_rate else seen
        choices = [t for t in pool if t not in avoid] or [t for t in seen + unseen if t not in avoid]
        return rng.choice(choices)


class Builder:
    """Assembles one sentence's text piece by piece, keeping the character span of every aspect."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.text = ""
        self.aspects: list[tuple[int, int, str]] = []  # (from, to, polarity)
        self.used: set[str] = set()  # opinion words and clause templates already in the sentence

    def word(self, pool: list[str]) -> str:
        choice = self.rng.choice([w for w in pool if w not in self.used] or pool)
        self.used.add(choice)
        return choice

    def emit(self, template: str, term: str | None = None, group: str | None = None,
             polarity: str | None = None) -> None:
        """Appends ``template`` with its slots filled; ``{A}`` is the aspect ``term`` of ``polarity``."""
        pos, neg = (GROUPS[group][2], GROUPS[group][3]) if group else ([], [])
        for piece in _SLOT.split(template):
            slot = piece[1:-1] if _SLOT.fullmatch(piece) else None
            if slot is None:
                self.text += piece
            elif slot == "A":
                self.aspects.append((len(self.text), len(self.text) + len(term), polarity))
                self.text += term
            else:
                self.text += {
                    "BE": lambda: "are" if term in PLURAL else "is",
                    "POS": lambda: self.word(pos + GOOD[:2]),
                    "NEG": lambda: self.word(neg + BAD[:2]),
                    "POSW": lambda: self.word([w for w in pos if " " not in w]),
                    "NEGW": lambda: self.word([w for w in neg if " " not in w]),
                    "GOOD": lambda: self.word(GOOD),
                    "BAD": lambda: self.word(BAD),
                    "SOSO": lambda: self.word(SO_SO),
                    "INT": lambda: self.word(INTENSIFIERS),
                    "PRODUCT": lambda: self.rng.choice(PRODUCTS),
                    "PLACE": lambda: self.rng.choice(PLACES),
                    "DAY": lambda: self.rng.choice(DAYS),
                    "MONTH": lambda: self.rng.choice(MONTHS),
                    "NUMWORD": lambda: self.rng.choice(NUMWORDS),
                }[slot]()

    def clause(self, polarity: str, term: str, group: str) -> None:
        pool = CLAUSES[polarity] + (NEUTRAL_BY_GROUP[group] if polarity == "neutral" else [])
        self.emit(self.word(pool), term, group, polarity)

    def frame(self, template: str, clauses: list[tuple[str, str, str]]) -> None:
        """``template`` with ``{C}`` (or ``{C1}``, ``{C2}``, ``{C3}``) replaced by clauses (polarity, term, group)."""
        for piece in _SLOT.split(template):
            if piece in ("{C}", "{C1}", "{C2}", "{C3}"):
                self.clause(*clauses[0 if piece == "{C}" else int(piece[2]) - 1])
            else:
                self.emit(piece)

    def finish(self) -> tuple[str, list[tuple[str, str, int, int]]]:
        text = _SENTENCE_START.sub(lambda m: m.group().upper(), self.text)  # same length: spans still hold
        return text, [(text[a:b], polarity, a, b) for a, b, polarity in self.aspects]


def sentence(rng: random.Random, terms: Terms, unseen: float, kind: str,
             polarities: list[str]) -> tuple[str, list[tuple[str, str, int, int]]]:
    """One sentence of ``kind`` whose aspects have ``polarities``: its text and aspects (term, polarity, from, to)."""
    domain = rng.choice(["gadget", "restaurant"])
    builder = Builder(rng)
    if kind == "none":
        builder.emit(rng.choice(NO_ASPECT[domain]))
        return builder.finish()
    clauses, used = [], set()
    for polarity in polarities:
        group = rng.choice(DOMAIN_GROUPS[domain])
        term = terms.pick(group, rng, unseen, used)
        used.add(term)
        clauses.append((polarity, term, group))
    if kind == "single":
        polarity, term, group = clauses[0]
        if polarity in SHORT and rng.random() < SHORT_RATE:
            builder.emit(rng.choice(SHORT[polarity]), term, group, polarity)
        else:
            builder.frame(rng.choice(SINGLE + SINGLE_BY_DOMAIN[domain]), clauses)
    else:
        builder.frame(rng.choice({"contrast": CONTRAST, "same": SAME, "triple": TRIPLE}[kind]), clauses)
    return builder.finish()


def split_sentences(rng: random.Random, terms: Terms, size: int, unseen: float) -> list:
    """``size`` sentences; sentence kinds and polarities drawn by ``quota``."""
    kinds = quota(rng, KINDS, size)
    count = Counter(kinds)
    plan = {
        "none": iter([[]] * count["none"]),
        "single": iter([[p] for p in quota(rng, SINGLE_POLARITY, count["single"])]),
        "contrast": iter([rng.sample(pair, 2) for pair in quota(rng, CONTRAST_PAIRS, count["contrast"])]),
        "same": iter([[p] * 2 for p in quota(rng, SAME_POLARITY, count["same"])]),
        "triple": iter([[p] * 3 for p in quota(rng, SAME_POLARITY, count["triple"])]),
    }
    return [sentence(rng, terms, unseen, kind, next(plan[kind])) for kind in kinds]


def generate(seed: int = SEED) -> dict[str, list[tuple[str, list[tuple[str, str, int, int]]]]]:
    rng = random.Random(seed)
    terms = Terms(rng)
    return {split: split_sentences(rng, terms, size, 0.0 if split == "Train" else UNSEEN_RATE)
            for split, size in SIZES.items()}


def to_xml(sentences: list[tuple[str, list[tuple[str, str, int, int]]]], first_id: int) -> str:
    lines = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>', "<sentences>"]
    for n, (text, aspects) in enumerate(sentences):
        lines += [f'    <sentence id="{first_id + n}">', f"        <text>{escape(text)}</text>"]
        if aspects:
            lines.append("        <aspectTerms>")
            for term, polarity, start, end in aspects:
                assert text[start:end] == term
                lines.append(f"            <aspectTerm term={quoteattr(term)} polarity={quoteattr(polarity)} "
                             f'from="{start}" to="{end}"/>')
            lines.append("        </aspectTerms>")
        lines.append("    </sentence>")
    lines.append("</sentences>")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: the package's)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for split, sentences in generate(args.seed).items():
        path = args.out / f"Gadgets_{split}.xml"
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(to_xml(sentences, FIRST_ID[split]))
        counts = Counter(polarity for _, aspects in sentences for _, polarity, _, _ in aspects)
        print(f"{path}: {len(sentences)} sentences, {sum(counts.values())} aspects {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
