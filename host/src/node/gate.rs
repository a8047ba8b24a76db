//! The operation gate: admits work while the node runs, and lets shutdown
//! wait until every admitted operation has finished.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

const CLOSED: usize = 1 << (usize::BITS - 1);

/// Counts operations in progress; once closed, admits nothing new.
#[derive(Debug, Default)]
pub struct OperationGate {
    state: AtomicUsize,
    idle: Notify,
}

/// Held by an admitted operation; its drop lets shutdown proceed.
#[derive(Debug)]
pub struct GateGuard<'a> {
    gate: &'a OperationGate,
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let previous = self.gate.state.fetch_sub(1, Ordering::AcqRel);
        if previous == CLOSED | 1 {
            self.gate.idle.notify_waiters();
        }
    }
}

impl OperationGate {
    /// Admit one operation, or `None` once the gate is closed.
    pub fn admit(&self) -> Option<GateGuard<'_>> {
        let previous = self.state.fetch_add(1, Ordering::AcqRel);
        if previous & CLOSED != 0 {
            drop(GateGuard { gate: self });
            return None;
        }
        Some(GateGuard { gate: self })
    }

    /// Operations admitted and not finished.
    pub fn active(&self) -> usize {
        self.state.load(Ordering::Acquire) & !CLOSED
    }

    /// Whether the gate still admits.
    pub fn is_open(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED == 0
    }

    /// Close admission and wait for admitted operations to finish.
    pub async fn close_and_drain(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.active() == 0 {
                return;
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn closing_waits_for_admitted_work_and_refuses_new_work() {
        let gate = Arc::new(OperationGate::default());
        let guard = gate.admit().unwrap();
        let closer = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.close_and_drain().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !closer.is_finished(),
            "shutdown waits for the admitted operation"
        );
        assert!(gate.admit().is_none(), "a closed gate admits nothing");
        drop(guard);
        tokio::time::timeout(Duration::from_secs(1), closer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(gate.active(), 0);
    }
}
