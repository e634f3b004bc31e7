//! Sending a finished task back for one more round with a person's comment.
