//! How many requests a planned deployment admits at once; more are refused at once rather than served late.

/// As many requests as `capacity_rps` completes in time. By Little's law N requests in the system at C req/s
/// spend N / C there. At the plan's own load a request spends about twice its service time `service_s` (the
/// entry's drop budget: its batch and the fastest later tasks; the paper doubles latencies for batching), which
/// the bound must admit. Under sustained overload the queue fills to N, and with N = C·SLO the last admitted is
/// answered just at its deadline (ten minutes at 2× held the median at 4.86 of 5 s and left 12% of the
/// capacity late), so where the SLO leaves room one service time is kept in hand: N = C·max(SLO − service,
/// min(2·service, SLO)), and at least one.
pub fn limit(capacity_rps: f64, slo_s: f64, service_s: f64) -> u32 {
    let window = (slo_s - service_s).max((2.0 * service_s).min(slo_s));
    (capacity_rps * window).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_own_service_time_is_kept_in_hand_where_the_slo_leaves_room() {
        // 10 req/s, 5 s SLO, 0.5 s of service: 45 at once wait 4.5 s and are answered by 5 s.
        assert_eq!(limit(10.0, 5.0, 0.5), 45);
        assert_eq!(limit(10.0, 5.0, 0.0), 50, "no service time known: the whole SLO");
        // A plan whose path takes most of the SLO needs about twice its service time at its own load.
        assert_eq!(limit(100.0, 0.65, 0.32), 64);
        assert_eq!(limit(10.0, 1.0, 0.9), 10, "never beyond the whole SLO");
        assert_eq!(limit(0.01, 1.0, 0.0), 1, "at least one");
    }
}
