"""The rounds of a sweep run with --rounds R (this sweep's and ../torch/sweep.sh's): every contender
ran R times, alternating with the others, so that the machine's drifting load reaches all alike.

A run here is a dict with "ok" and "iteration_s" (its median iteration). merge_rounds turns the
rounds of one point into one entry; at_or_below says whether one entry's rounds support "at or
below" another's. Neither is worth more than its rounds: one round has no spread, so it makes no
claim."""
import statistics


def merge_rounds(runs, key):
    """One entry per key(run), in the order the keys first appear: iteration_s is the median of its
    rounds' medians, round_seconds all of them, spread_s their [min, max], rounds how many ran,
    cpu_s (where every round has it) the median of the rounds' CPU seconds. The other fields are those of the round nearest the median (its busy time, link samples,
    time to accuracy; of two as near, the earlier); a failed round fails the entry, which then
    shows that round's fields."""
    points = {}
    for r in runs:
        points.setdefault(key(r), []).append(r)
    merged = []
    for rounds in points.values():
        failed = [r for r in rounds if not r["ok"]]
        if failed:
            merged.append({**failed[0], "rounds": len(rounds), "round_seconds": None, "spread_s": None})
            continue
        seconds = [r["iteration_s"] for r in rounds]
        median = statistics.median(seconds)
        nearest = min(rounds, key=lambda r: abs(r["iteration_s"] - median))
        entry = {**nearest, "iteration_s": median, "rounds": len(rounds), "round_seconds": seconds,
                 "spread_s": [min(seconds), max(seconds)]}
        cpu = [r.get("cpu_s") for r in rounds]
        if all(c is not None for c in cpu):
            entry["cpu_s"] = statistics.median(cpu)
        merged.append(entry)
    return merged


def at_or_below(run, other):
    """True when every round of run took at most as long as every round of other (its slowest
    no slower than the other's fastest), False when every round took longer, None otherwise:
    the spreads overlap, either has one round only, or either failed."""
    if not run or not other or not run.get("spread_s") or not other.get("spread_s"):
        return None
    if run["rounds"] < 2 or other["rounds"] < 2:
        return None
    if run["spread_s"][1] <= other["spread_s"][0]:
        return True
    if run["spread_s"][0] > other["spread_s"][1]:
        return False
    return None


def spread_cell(run):
    """A table cell: the rounds and their spread in seconds, "3 (0.412-0.431)"; "1" for one round."""
    if not run.get("spread_s") or run["rounds"] < 2:
        return str(run.get("rounds", 1))
    low, high = run["spread_s"]
    return f"{run['rounds']} ({low:.3f}-{high:.3f})"
