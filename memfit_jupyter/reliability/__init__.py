"""SPEC-10 reliability: execution guarantees, circuit breakers, confidence-weighted synthesis."""
