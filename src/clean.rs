//! clean (placeholder until written).
