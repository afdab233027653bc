"""Print the README's benchmark tables (markdown) from the full-run JSON files."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def sim_throughput(r: dict) -> str:
    lines = ["| task | envs | physics threads | env steps/s | raw `mujoco.batch` steps/s | ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in r["throughput"]:
        if row["num_envs"] == 1 and row["nthread"] == 2:
            continue
        lines.append(f"| {row['task']} | {row['num_envs']} | {row['nthread']} | "
                     f"{row['env_steps_per_s']:,} | {row['raw_steps_per_s']:,} | "
                     f"{row['ratio']:.2f} |")
    lines += ["", "| rendering (panda, 3 views, 16 envs) | frames/s | three-view observations/s |",
              "| --- | ---: | ---: |"]
    for row in r["render"]:
        lines.append(f"| {row['size']}x{row['size']} | {row['frames_per_s']:,} | "
                     f"{row['multiview_obs_per_s']:,} |")
    lines += ["", f"Peak RSS of 256 `panda_pick_place` envs without rendering: "
              f"{r['peak_rss_mib_panda_256_envs']:.0f} MiB. "
              f"Lowest ratio at 256 envs: {r['min_ratio_at_max_envs']:.2f}. "
              f"({r['machine']['cores']} cores, {r['machine']['cpu']}, {r['date'][:10]}; "
              f"`{r['command']}`)"]
    return "\n".join(lines)


TABLES = {"sim_throughput": sim_throughput}


def main() -> None:
    for name, fn in TABLES.items():
        path = RESULTS / f"{name}.json"
        if path.exists():
            print(f"### {name}\n\n{fn(json.loads(path.read_text()))}\n")


if __name__ == "__main__":
    main()
