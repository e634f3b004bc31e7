//! Stage 8: report (placeholder until written).
