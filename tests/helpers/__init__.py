"""What several test modules share: fixtures' builders, oracles and small data (never a test module imported
by another)."""
