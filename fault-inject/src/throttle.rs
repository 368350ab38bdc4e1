//! Token buckets: the shared budget behind `throttle=` and `iops=` rules.

/// A token bucket that lets requests go into debt: each request takes its tokens at
/// once and is told how long to wait until the bucket would have held them. Callers
/// that arrive while the bucket is in debt queue behind earlier ones, so the long-run
/// rate is exact and a burst is at most `capacity` tokens.
///
/// Time is passed in (seconds on any monotonic clock), which keeps the bucket pure.
///
/// ```
/// use slowfs_faults::TokenBucket;
/// let mut bucket = TokenBucket::new(1000.0, 100.0); // 1000 tokens/s, bursts of 100
/// assert_eq!(bucket.take(0.0, 100.0), 0.0);          // the burst is free
/// assert_eq!(bucket.take(0.0, 500.0), 0.5);          // then 500 tokens cost 0.5 s
/// ```
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: f64,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` tokens per second, holding at most `capacity`.
    pub fn new(rate: f64, capacity: f64) -> TokenBucket {
        TokenBucket {
            rate,
            capacity,
            tokens: capacity,
            last: 0.0,
        }
    }

    /// Takes `amount` tokens at time `now`; returns how many seconds the caller must
    /// wait before its request may proceed.
    pub fn take(&mut self, now: f64, amount: f64) -> f64 {
        if now > self.last {
            self.tokens = (self.tokens + (now - self.last) * self.rate).min(self.capacity);
            self.last = now;
        }
        self.tokens -= amount;
        if self.tokens >= 0.0 {
            0.0
        } else {
            -self.tokens / self.rate
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn back_to_back_requests_queue_at_the_rate() {
        let mut bucket = TokenBucket::new(100.0, 10.0);
        let waits: Vec<f64> = (0..5).map(|_| bucket.take(0.0, 10.0)).collect();
        assert_eq!(waits, vec![0.0, 0.1, 0.2, 0.3, 0.4]);
    }

    #[test]
    fn idle_time_refills_up_to_capacity_only() {
        let mut bucket = TokenBucket::new(100.0, 10.0);
        bucket.take(0.0, 10.0);
        assert_eq!(bucket.take(100.0, 10.0), 0.0);
        assert!((bucket.take(100.0, 10.0) - 0.1).abs() < 1e-9);
    }

    proptest! {
        /// Over any arrival pattern, a request is released no earlier than the rate allows:
        /// tokens released by time t never exceed capacity + rate * t.
        #[test]
        fn rate_over_time_is_bounded(
            rate in 10.0f64..10_000.0,
            capacity in 1.0f64..1_000.0,
            requests in prop::collection::vec((0.0f64..0.5, 1.0f64..500.0), 1..200),
        ) {
            let mut bucket = TokenBucket::new(rate, capacity);
            let mut now = 0.0;
            let mut released = 0.0;
            let mut last_release: f64 = 0.0;
            for (gap, amount) in requests {
                now += gap;
                let release = now + bucket.take(now, amount);
                last_release = last_release.max(release);
                released += amount;
                prop_assert!(released <= capacity + rate * last_release + 1e-6,
                    "released {} by {}", released, last_release);
            }
        }

        /// A caller that always waits out its delay gets the full rate in the long run.
        #[test]
        fn saturated_bucket_delivers_the_rate(rate in 10.0f64..10_000.0, amount in 1.0f64..100.0) {
            let capacity = rate * 0.1;
            let mut bucket = TokenBucket::new(rate, capacity);
            let mut now = 0.0;
            let mut moved = 0.0;
            while now < 10.0 {
                now += bucket.take(now, amount);
                moved += amount;
            }
            let achieved = moved / now;
            prop_assert!((achieved - rate).abs() / rate < 0.05 + capacity / (rate * now),
                "achieved {} of {}", achieved, rate);
        }
    }
}
