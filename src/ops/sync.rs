//! Syncing a run between its PostgreSQL store and the local record.
