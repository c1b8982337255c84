//! Work spread over the machine's cores, for work made of many independent
//! items: the footers of a large run's thousands of part files, a report's
//! hundreds of trial pages.

/// `each` applied to every item of `items`, the results in the items'
/// order. The items are split into runs of consecutive items, one per core
/// at most and none shorter than `min_run`, so a handful stay on the
/// calling thread; the first error is returned (after every run is done).
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
    let run = items.len().div_ceil(threads);
    let each = &each;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(run)
            .map(|part| scope.spawn(move || part.iter().map(each).collect::<Result<Vec<R>, E>>()))
            .collect();
        let mut results = Vec::with_capacity(items.len());
        let mut failed = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok(part)) => results.extend(part),
                Ok(Err(error)) => failed = failed.or(Some(error)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match failed {
            Some(error) => Err(error),
            None => Ok(results),
        }
    })
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
}
