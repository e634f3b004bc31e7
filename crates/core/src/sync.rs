//! Locks taken the one way plait takes them: a lock whose holder panicked is taken anyway.
//! What it guards is plait's own bookkeeping (records, counters, queues), each change made
//! whole under the lock, so a panic elsewhere leaves nothing half written there, and the
//! run goes on to record the panic as the task's failure rather than dying of it.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`], a poisoned lock taken as it is.
pub trait Locked<T: ?Sized> {
    /// The guard, whether or not a holder panicked.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Locked as _;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_anyway() {
        let count = Arc::new(Mutex::new(1));
        let held = count.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.locked();
            panic!("the holder panics");
        })
        .join();
        assert!(count.is_poisoned());
        *count.locked() += 1;
        assert_eq!(*count.locked(), 2);
    }
}
