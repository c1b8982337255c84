//! Work spread over the machine's cores, for work made of many independent
//! items: the footers of a large run's thousands of part files, the parts a
//! report's trial pages read, the pages themselves.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `each` applied to every item of `items`, the results in the items'
/// order. One thread per core at most, and none for fewer than `min_run`
/// items, so a handful stay on the calling thread. Each thread takes the
/// next item not yet taken, so an item that costs more than the others (a
/// part holding many of the trials a report reads) holds up only its own
/// thread. After an error no item is started; the error returned is the
/// first in the items' order.
pub fn map_on_cores<T, R, E>(
    items: &[T],
    min_run: usize,
    each: impl Fn(&T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().div_ceil(min_run.max(1)))
        .max(1);
    if threads == 1 {
        return items.iter().map(each).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            match each(item) {
                Ok(result) => done.push((i, result)),
                Err(error) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err((i, error));
                }
            }
        }
        Ok(done)
    };
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        (workers.into_iter())
            .map(|worker| match worker.join() {
                Ok(outcome) => outcome,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    // Items are taken in order, so every item before a failed one was
    // finished: the failure with the lowest index is the first.
    let mut results: Vec<(usize, R)> = Vec::with_capacity(items.len());
    let mut first_error: Option<(usize, E)> = None;
    for outcome in outcomes {
        match outcome {
            Ok(done) => results.extend(done),
            Err((i, error)) => {
                if first_error.as_ref().is_none_or(|(first, _)| i < *first) {
                    first_error = Some((i, error));
                }
            }
        }
    }
    if let Some((_, error)) = first_error {
        return Err(error);
    }
    results.sort_unstable_by_key(|(i, _)| *i);
    Ok(results.into_iter().map(|(_, result)| result).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..1000).collect();
        let doubled = map_on_cores(&items, 10, |i| Ok::<_, String>(i * 2));
        assert_eq!(doubled, Ok(items.iter().map(|i| i * 2).collect::<Vec<_>>()));
        let failed = map_on_cores(&items, 10, |&i| if i % 300 == 299 { Err(i) } else { Ok(i) });
        assert_eq!(failed, Err(299));
        assert_eq!(
            map_on_cores(&[] as &[u32], 10, |&i| Ok::<_, ()>(i)),
            Ok(vec![])
        );
    }

    #[test]
    fn a_slow_item_holds_up_only_its_own_thread() {
        // Every item records which thread ran it: with the first item slow,
        // the others are not all left to wait behind it on its thread.
        let items: Vec<u32> = (0..64).collect();
        let ran_on = map_on_cores(&items, 1, |&i| {
            if i == 0 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Ok::<_, ()>(std::thread::current().id())
        })
        .unwrap();
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            let with_first = ran_on.iter().filter(|id| **id == ran_on[0]).count();
            assert_eq!(with_first, 1, "the slow item's thread took no other item");
        }
    }
}
