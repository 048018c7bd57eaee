//! Contenders timed in turns: each round times a short burst of every
//! contender, in a new order each round, and the report gives each
//! contender's median over the rounds and the edge of its fastest tenth,
//! with its ratios to the baselines. Taking turns keeps a machine whose
//! speed drifts (a shared virtual machine) from favouring whichever
//! contender ran in its fast minutes, which criterion's one-after-another
//! groups cannot; a shared machine only ever adds time, so the fastest
//! tenth moves less from run to run than the median.
#![allow(dead_code)]

/// The rounds and the burst of a run: the command line's first two numbers
/// (`cargo bench --bench <name> -- <rounds> <burst>`), else the defaults.
pub fn rounds_and_burst(rounds: usize, burst: u64) -> (usize, u64) {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    (
        args.first().map_or(rounds, |&r| r as usize),
        args.get(1).copied().unwrap_or(burst),
    )
}

/// `rounds` rounds of `time(i)` for each of `count` contenders, in turns;
/// each contender's times, sorted.
pub fn take_turns(
    count: usize,
    rounds: usize,
    mut time: impl FnMut(usize) -> f64,
) -> Vec<Vec<f64>> {
    let mut times = vec![Vec::with_capacity(rounds); count];
    let mut order: Vec<usize> = (0..count).collect();
    for round in 0..rounds {
        order.rotate_left(1);
        if round % 2 == 1 {
            order.reverse();
        }
        for &i in &order {
            times[i].push(time(i));
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    times
}

/// Prints the medians and the fastest tenths of `times` (nanoseconds per
/// request, as [`take_turns`] gives them), each with its ratio to each of
/// the first `baselines` contenders.
pub fn report(title: &str, names: &[&str], times: &[Vec<f64>], baselines: usize) {
    for (label, at) in [("medians", 2), ("fastest tenth", 10)] {
        let ns: Vec<f64> = times.iter().map(|t| t[t.len() / at]).collect();
        println!("\n{title}, {label}:");
        let columns: String = names[..baselines]
            .iter()
            .map(|b| format!(" × {b} |"))
            .collect();
        println!("| contender | ns/request |{columns}");
        println!("|---|---|{}", "---|".repeat(baselines));
        for (name, m) in names.iter().zip(&ns) {
            let ratios: String = ns[..baselines]
                .iter()
                .map(|b| format!(" {:.3} |", m / b))
                .collect();
            println!("| {name} | {m:.1} |{ratios}");
        }
    }
}
