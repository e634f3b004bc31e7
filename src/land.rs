//! Stage 7: land (placeholder until written).
