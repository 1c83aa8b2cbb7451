"""The tag-validity oracle of the CRF and transition tests: a span reader, independent of the transition
tables."""


def valid_sequence(scheme, tags):
    """Oracle written as a span reader (independent of the transition tables): is ``tags`` a valid sequence?"""
    inside = None  # entity type of the open span
    for tag in tags:
        prefix, _, entity = tag.partition("-")
        if scheme == "iob2":
            if prefix == "I" and inside != entity:
                return False
            inside = None if prefix == "O" else entity
        else:
            if prefix in ("I", "E") and inside != entity:
                return False
            if prefix in ("O", "B", "S") and inside is not None:
                return False
            inside = entity if prefix in ("B", "I") else None
    return scheme == "iob2" or inside is None
