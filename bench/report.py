"""Generate docs/benchmarks.md from the full-run JSON files in bench/results/.

``python bench/report.py`` prints the document, ``--write`` writes it and ``--check``
exits with status 1 when the file on disk differs from what the JSON files give. Every
full-run JSON file (``"quick": false``) must have a table function in :data:`TABLES`;
quick-run files are left out.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from statistics import fmean

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


def _fmt(value, unit: str = "") -> str:
    return "not reached" if value is None else f"{value:,}{unit}"


def _pct_or_dash(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def _rate_or_dash(value) -> str:
    return "-" if value is None else f"{value:,}"


def ppo(r: dict) -> str:
    reach = r["panda_reach"]
    lines = ["| panda_reach contender | envs | time to 95% (seeds: min-max) | env steps to 95% "
             "| reached 95% | best success | collection / learning steps/s | CPU s to 95% "
             "| load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, c in reach["contenders"].items():
        spread = c["wall_s_to_95_spread"]
        wall = _fmt(c["wall_s_to_95"], " s") + (f" ({spread[0]:.0f}-{spread[1]:.0f})"
                                                  if c["wall_s_to_95"] is not None else "")
        lines.append(f"| {name} | {c['num_envs']} | {wall} | {_fmt(c['env_steps_to_95'])} | "
                     f"{c['reached_95']} | {c['best_success']:.0%} | "
                     f"{_rate_or_dash(c['collection_steps_per_s'])} / "
                     f"{_rate_or_dash(c['learning_steps_per_s'])} | "
                     f"{_fmt(c.get('cpu_s_to_95'), ' s')} | "
                     f"{_rate_or_dash(c.get('load_avg_mean'))} |")
    targets = reach["ratio_targets"]
    parts = []
    for name in reach["contenders"]:
        if name == "ours":
            continue
        ratio = reach["ratio_vs_ours"].get(name)
        bound = reach["ratio_vs_ours_lower_bound"].get(name)
        text = (f"{name} {ratio:.2f}x" if ratio is not None else
                f"{name} >= {bound:.2f}x (missed 95% in some seed within its budget)"
                if bound is not None else f"{name}: no ratio")
        per_seed = ", ".join("-" if v is None else f"{v:.2f}"
                             for v in reach["ratio_vs_ours_per_seed"].get(name, []))
        if name in targets:
            met = reach["ratio_targets_met"][name]
            text += f" (target >= {targets[name]}: {'met' if met else 'missed'})"
        parts.append(f"{text} [per seed: {per_seed}]")
    seeds = len(reach["contenders"]["ours"]["seeds"])
    lines += ["", f"Mean time to 95% over ours ({seeds} seeds): " + "; ".join(parts) + "."]
    if cpu := reach.get("ratio_vs_ours_cpu"):
        lines += ["", "Mean CPU seconds to 95% over ours' (process CPU time over the same "
                  "spans; load: the 1-minute load average at the evaluations): "
                  + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in cpu.items()) + "."]
    push = r.get("panda_push") or {}
    if "action_spaces" in push:
        lines += ["", "| panda_push action space (dense reward) | seeds | "
                  "mean success against env steps | final | best | training time | load | "
                  "ran |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
        for action, a in push["action_spaces"].items():
            curve = ", ".join(f"{steps / 1e6:.1f}M: {ok:.0%}" for steps, ok in a["mean_curve"])
            loads = [r["load_avg_mean"] for r in a["runs"] if r.get("load_avg_mean")]
            load = f"{sum(loads) / len(loads):.1f}" if loads else "-"
            lines.append(f"| {action}{' (shipped)' if action == push['shipped_action'] else ''}"
                         f" | {len(a['seeds'])} | {curve} | {a['mean_final_success']:.0%} | "
                         f"{a['mean_best_success']:.0%} | {a['mean_train_wall_s']:.0f} s | "
                         f"{load} | {a.get('date', push['date'])[:10]} |")
        lines.append("")
    if (pick := r.get("panda_pick_place")) and "runs" in pick:
        lines += [_pick_place(pick), ""]
    for task in ("panda_push", "go2_walk"):
        t = r.get(task)
        if not t or "train_wall_s" not in t:
            continue
        extra = ""
        if "tracking" in t:
            tr = t["tracking"]
            extra = (f", under a {tr['command'][0]} m/s forward command: "
                     f"{tr['forward_distance_m']:.2f} m in {tr['seconds']:.0f} s, tracking error "
                     f"{tr['lin_vel_error_mps']:.2f} m/s, fall rate {tr['fall_rate']:.0%}")
        rerun = f"; rerun on {t['date'][:10]} with `--only {task}`" if "date" in t else ""
        lines.append(f"- {task} (the shipped settings, {t['stopped_by']}{rerun}): "
                     f"{t['best_success']:.0%} best success after {t['env_steps']:,} env "
                     f"steps ({t['train_wall_s']:.0f} s){extra}.")
    lines += ["", f"({r['machine']['cores']} cores, {r['machine']['cpu']}; "
              f"`python bench/ppo.py`; curves: `bench/results/ppo_panda_reach.png`)"]
    return "\n".join(lines)


def _pick_place(p: dict) -> str:
    """The panda_pick_place section: per-seed success at the end, the mean curve, time."""
    points = p["mean_curve"][3::4]
    if points[-1] != p["mean_curve"][-1]:
        points.append(p["mean_curve"][-1])
    curve = ", ".join(f"{steps / 1e6:.1f}M: {ok:.0%}" for steps, ok in points)
    finals = " / ".join(f"{run['final_success']:.0%}" for run in p["runs"])
    walls = " / ".join(f"{run['train_wall_s']:.0f}" for run in p["runs"])
    loads = [run["load_avg_mean"] for run in p["runs"] if run.get("load_avg_mean")]
    load = f"{sum(loads) / len(loads):.1f}" if loads else "-"
    met = p["mean_final_success"] >= p["target_success"]
    return "\n".join([
        "| panda_pick_place action space (dense reward, shipped settings) | seeds | "
        "mean success against env steps | final (per seed) | training time per seed | load | ran |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
        f"| {p['runs'][0]['action']} | {len(p['seeds'])} | {curve} | {p['mean_final_success']:.0%} "
        f"({finals}; target {p['target_success']:.0%}: {'met' if met else 'missed'}) | "
        f"{walls} s | {load} | {p['date'][:10]} |"])


def _rate(t: dict) -> str:
    return f"{t['per_s']:,.0f} (best batch {t['best_per_s']:,.0f})"


def reward_model(r: dict) -> str:
    lines = ["| task (held-out episodes) | VOC | reversed VOC | success F1 | success AUROC | "
             "Pearson vs sim | pairwise acc. | counterfactual gap | data + training |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for task in ("panda_reach", "panda_push", "panda_pick_place"):
        if task not in r:
            continue
        m = r[task]
        lines.append(f"| {task} | {m['voc']:.3f} | {m['voc_reversed']:.3f} | "
                     f"{m['success_f1']:.3f} | {m['success_auroc']:.3f} | "
                     f"{m['progress_pearson']:.3f} | {m['pairwise_accuracy']:.3f} | "
                     f"{m['counterfactual_gap']:.3f} | {m['data_seconds']:.0f} + "
                     f"{m['train_seconds']:.0f} s |")
    for task in ("panda_reach", "panda_push"):
        v = r.get(f"visual_shift_{task}")
        if v:
            lines += ["", _visual_shift(v)]
    if r.get("policy_states_panda_push"):
        lines += ["", _policy_states(r["policy_states_panda_push"])]
    t = r.get("throughput")
    if t:
        lines += ["", f"| PRM scoring, {t['batch']} observations x {t['views']} views | "
                  "observations/s | CPU s per batch |", "| --- | ---: | ---: |"]
        for label, key in (("96x96, scoring path, 2 threads", "score_96"),
                           ("96x96, scoring path, 1 thread", "score_96_one_thread"),
                           ("96x96, plain `predict` (before), 2 threads", "predict_96"),
                           ("96x96, plain `predict` (before), 1 thread",
                            "predict_96_one_thread"),
                           ("64x64, scoring path, 2 threads", "score_64"),
                           ("64x64, scoring path, 1 thread", "score_64_one_thread"),
                           ("64x64, plain `predict` (before), 2 threads", "predict_64"),
                           ("64x64, plain `predict` (before), 1 thread",
                            "predict_64_one_thread"),
                           ("rendering the same views (16 envs), 96x96", "render_96"),
                           ("rendering the same views (16 envs), 64x64", "render_64")):
            if key in t:
                lines.append(f"| {label} | {_rate(t[key])} | {t[key]['cpu_s_per_call']:.3f} |")
        one = ("" if "fast_over_predict_96_one_thread" not in t else
               f" (one thread: {t['fast_over_predict_96_one_thread']:.2f}x and "
               f"{t['fast_over_predict_64_one_thread']:.2f}x)")
        lines += ["", f"Scoring path over plain `predict`: {t['fast_over_predict_96']:.2f}x "
                  f"at 96x96, {t['fast_over_predict_64']:.2f}x at 64x64{one}; scoring over "
                  f"rendering: {t['score_over_render_96']:.0f}x (96x96). Load average "
                  f"(1 min) before/after: {t['load_avg_1min_before']:.1f}/"
                  f"{t['load_avg_1min_after']:.1f}."]
    s = r.get("ppo_speed")
    if s:
        lines += ["", f"| PPO on {s['task']}, {s['num_envs']} envs | env steps | collection "
                  "steps/s (vs sparse) | time share: physics / render / model / distill |",
                  "| --- | ---: | ---: | ---: |"]
        for name in ("sparse", "prm_distilled", "prm_direct"):
            a = s[name]
            ratio = 1.0 if name == "sparse" else s[f"{name}_over_sparse"]
            sh = a["reward_timing"]["share"] if a["reward_timing"] else {}
            share = " / ".join(f"{sh.get(k, 0):.0%}" for k in
                               ("physics", "render", "model", "distill"))
            lines.append(f"| {name} | {a['env_steps']:,} | {a['collection_fps']:,.0f} "
                         f"({ratio:.3f}) | {share} |")
        lines += ["", f"Load average (1 min) before/after: {s['load_avg_1min_before']:.1f}/"
                  f"{s['load_avg_1min_after']:.1f}."]
    lines += ["", f"({r['machine']['cores']} cores, {r['machine']['cpu']}, {r['date'][:10]}; "
              f"`{r['command']}`)"]
    return "\n".join(lines)


def _visual_shift(v: dict) -> str:
    """The visual-shift suite of one task: the PRM trained with and without randomisation
    (and, if run, randomised with given policies' rollouts in its data, and the RL
    benchmark's policy-coverage PRM)."""
    a, b = v["randomised"], v["plain"]
    more = {name: arm for name, arm in (("+ policy data", v.get("randomised_policies")),
                                        ("coverage", v.get("coverage"))) if arm}
    lines = [f"| {v['task']}, visual shift ({v['episodes_per_kind']} fresh episodes per kind) | "
             "F1, randomised | Pearson, randomised | ECE, randomised | F1, plain | "
             "Pearson, plain |" + "".join(f" F1, {n} | Pearson, {n} |" for n in more),
             "| --- | ---: | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * len(more)]
    for kind, m in a["shift"].items():
        p = b["shift"][kind]
        extra = "".join(f" {c['shift'][kind]['success_f1']:.3f} | "
                        f"{c['shift'][kind]['progress_pearson']:.3f} |" for c in more.values())
        lines.append(f"| {kind} | {m['success_f1']:.3f} | {m['progress_pearson']:.3f} | "
                     f"{m['success_ece']:.3f} | {p['success_f1']:.3f} | "
                     f"{p['progress_pearson']:.3f} |{extra}")
    cal = a["success_calibration"]
    lines += ["", f"Randomised PRM: {a['train_states']:,} training states, data + training "
              f"{a['data_seconds']:.0f} + {a['train_seconds']:.0f} s; success calibration "
              f"scale {cal['scale']:.2f}, bias {cal['bias']:.2f} (held-out ECE "
              f"{cal['ece_before']:.3f} -> {cal['ece_after']:.3f}). Load average (1 min) "
              f"before/after: {v['load_avg_1min_before']:.1f}/{v['load_avg_1min_after']:.1f}."]
    return "\n".join(lines)


def _policy_states(v: dict) -> str:
    """The PRMs of the visual-shift section on the states of another PPO run's policies."""
    lines = [f"| {v['task']} PRM on PPO policies' states ({v['stages']} stages x "
             f"{v['episodes']} episodes, noise {v['noise']}) | Pearson | per stage | "
             "step-delta | paraphrase change | near miss (max) |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    for arm, m in v["arms"].items():
        stages = " / ".join(f"{x:.2f}" for x in m["pearson_per_stage"].values())
        lines.append(f"| {arm} | {m['pearson']:.3f} | {stages} | "
                     f"{m['step_delta_pearson']:.3f} | {m['paraphrase_abs_change_mean']:.3f} | "
                     f"{m['near_miss_max']:.3f} |")
    lines += ["", f"Policies: checkpoints of `{Path(v['policy']).name}` (a run the PRMs' data "
              "did not come from). Targets: Pearson >= 0.9, step-delta >= 0.6, paraphrase "
              f"<= 0.1, near miss <= 0.3. Load average (1 min) before/after: "
              f"{v['load_avg_1min_before']:.1f}/{v['load_avg_1min_after']:.1f}."]
    return "\n".join(lines)


def reward_rl(r: dict) -> str:
    lines = []
    for task, rl in r.items():
        if not (isinstance(rl, dict) and "arms" in rl):
            continue
        seeds = rl.get("seeds", 1)
        over = f", mean of {seeds} seeds" if seeds > 1 else ""
        curves = all("eval_curve" in a for a in rl["arms"].values())
        reach = ("env steps to 80% / 95% (deterministic eval of the checkpoints)" if curves
                 else "env steps to 80% (training)")
        lines += [f"| {task}, PPO, {rl['budget_env_steps']:,} env steps{over} | deterministic "
                  f"eval success | final training success | {reach} | "
                  "collection steps/s (vs sparse) |", "| --- | ---: | ---: | ---: | ---: |"]
        for name, a in rl["arms"].items():
            ev = "-" if a["eval_success"] is None else f"{a['eval_success']:.1%}"
            if seeds > 1 and a["eval_success"] is not None:
                ev += " (" + ", ".join(f"{e:.0%}" for e in a["eval_success_per_seed"]) + ")"
            ratio = rl["collection_fps_ratio_vs_sparse"][name]
            steps = (f"{_fmt(a['env_steps_to_80'])} / {_fmt(a['env_steps_to_95'])}" if curves
                     else _fmt(a["env_steps_to_80"]))
            lines.append(f"| {name} | {ev} | {a['final_train_success']:.0%} | {steps} | "
                         f"{a['collection_fps']:,.0f} "
                         f"({'-' if ratio is None else f'{ratio:.2f}'}) |")
        timing = rl["arms"]["prm_shaped"]["reward_timing"]
        notes = ["distilled PRM step: " + ", ".join(
            f"{k} {v:.0%}" for k, v in timing["share"].items()) +
            f" ({timing['frames_scored']:,} frames for {timing['env_steps']:,} env steps)"]
        shaping = (rl.get("shaping") or {}).get("prm_shaped") or {}
        if shaping.get("prm_weight") is not None:
            gamma, weight = shaping["gamma"], shaping["prm_weight"]
            share = weight * (1 - gamma) / shaping["sparse_weight"] if gamma < 1 else None
            notes.append(f"shaping weight {weight:g}" + (
                "" if share is None else f" ({share:.2f} of the sparse return bound "
                f"{shaping['sparse_weight']:g} / (1 - {gamma:g}))") + (
                "; in PPO's advantages, not the reward" if shaping.get("shaping_target")
                == "advantage" else ""))
        refresh = shaping.get("prm_refresh")
        if refresh:
            layers = {"top": " on the layers above its frozen trunk",
                      "all": " on all its layers"}.get(refresh.get("train"), "")
            rate = (f" at learning rate {refresh['learning_rate']:g}"
                    if refresh.get("learning_rate") else "")
            every = refresh["every_rollouts"]
            when = "after every rollout" if every == 1 else f"every {every} rollouts"
            kept_labels = ("; the distilled MLP keeps the older labels"
                           if refresh.get("keep_older_labels") else "")
            notes.append(f"PRM refreshed online {when} on {refresh['labels']} labels: "
                         f"{refresh['steps']} gradient steps{layers}{rate}{kept_labels}")
        kept = {a["ran"][:16] for a in rl["arms"].values() if a.get("ran")}
        if kept:
            notes.append("arms run on " + ", ".join(
                f"{day}: " + ", ".join(n for n, a in rl["arms"].items()
                                       if (a.get("ran") or "")[:16] == day)
                for day in sorted(kept)) + "; the rest on the run's date")
        per_seed = rl["arms"]["prm_shaped"].get("potential_vs_sim_pearson_per_seed") or [
            timing.get("potential_vs_sim_pearson") or {}]
        if all(q and q.get("model") is not None for q in per_seed):
            notes.append("on the states PPO visited, Pearson correlation with the simulator's "
                         "progress (per seed): PRM " +
                         " / ".join(f"{q['model']:.2f}" for q in per_seed) +
                         ", distilled MLP (before fitting them) " +
                         " / ".join(f"{q['distilled']:.2f}" for q in per_seed))
        states = (r.get(f"{task}_policy_states") or {}).get("policies")
        if states:  # fresh noisy rollouts of each seed's PRM-arm policy (--policy-states)
            measured = states[0]["date"][:16]
            earlier = (f" of the runs before {rl['date'][:16]} (measured {measured})"
                       if measured < rl["date"][:16] else "")
            stages = states[0]["stages"]
            which = ("final policies" if stages == 1 else
                     f"policies at {stages} stages of training")
            for prm in states[0]["prms"]:
                notes.append(f"PRM `{states[0]['prms'][prm]['prm']}` on fresh rollouts of "
                             f"the PRM arm's {which}"
                             f"{earlier} (noise {states[0]['action_noise']}), per seed: "
                             "Pearson " +
                             " / ".join(f"{s['prms'][prm]['pearson']:.2f}" for s in states) +
                             ", step-delta " + " / ".join(
                                 f"{s['prms'][prm]['step_delta_pearson']:.2f}" for s in states))
        oracle_2x, at_2x = rl.get("oracle_budget_2x"), rl.get("eval_at_2x_oracle")
        if oracle_2x and at_2x and oracle_2x["to_80"] is not None:
            there = {key: ", ".join(f"{n} {_pct_or_dash(e[key])}" for n, e in at_2x.items())
                     for key in ("to_80", "to_95")}
            notes.append(f"twice the oracle's env steps to 80% (deterministic): "
                         f"{oracle_2x['to_80']:,}, eval there: {there['to_80']}; twice its "
                         f"steps to 95%: {_fmt(oracle_2x['to_95'])}, eval there: "
                         f"{there['to_95']} (eval every "
                         f"{rl['arms']['oracle_dense']['eval_env_steps'][0]:,} env steps, "
                         f"{rl['arms']['oracle_dense']['eval_episodes']} episodes)")
        met = ", ".join(f"{k}: {'met' if v else 'missed'}" for k, v in rl["targets"].items())
        load = rl.get("load_avg_1min")
        notes.append(f"targets: {met}" + (f"; load average (1 min) before/after: "
                                           f"{load[0]:.1f}/{load[1]:.1f}" if load else ""))
        if "provenance" in rl:
            notes.append(rl["provenance"])
        # a section merged into the file records its own machine (and command, if known)
        where, command = ((rl["machine"], rl.get("command")) if "machine" in rl
                          else (r["machine"], r["command"]))
        lines += ["", "; ".join(notes) + f". Run {rl['date'][:10]}; curves: `{rl['plot']}`.",
                  "", f"({where['cores']} cores, {where['cpu']}"
                  + (f"; `{command}`)" if command else ")"), ""]
    return "\n".join(lines).rstrip("\n")


def ros_loop(r: dict) -> str:
    ros, sim = r["ros"], r["sim"]
    lines = ["| ROS 2 closed loop (panda_reach, sim_deploy) | p50 | p99 |",
             "| --- | ---: | ---: |"]
    for label, key in (("control-step jitter (ms)", "jitter_ms"),
                       ("policy node compute per step (ms)", "compute_ms"),
                       ("state message -> command received by the robot (ms)",
                        "state_to_command_latency_ms")):
        lines.append(f"| {label} | {r[key]['p50']:.2f} | {r[key]['p99']:.2f} |")
    lines += ["", f"Control rate {r['control_rate_hz']:.2f} Hz ({r['rate_ratio_to_nominal']:.3f} "
              f"of the nominal 50 Hz). Success through ROS {ros['success_rate']:.0%} of "
              f"{ros['episodes']} episodes against {sim['success_rate']:.0%} of "
              f"{sim['episodes']} in simulation with the same policy: ratio "
              f"{r['success_ratio']:.2f} (target >= 0.95). Watchdog trips during the run: "
              f"{ros['watchdog_trips']}; load average (1 min) before/after: "
              f"{ros['load_avg_1min'][0]:.1f}/{ros['load_avg_1min'][1]:.1f}. "
              f"({r['machine']['cores']} cores, {r['machine']['cpu']}, "
              f"`python bench/ros_loop.py`; DDS isolation: {ros['isolation']})"]
    jit = r.get("jitter")
    if jit:
        lines += ["", "| deploy on wall time, p50 / p99 (ms) | command period published | "
                  "received | delivery | node step period | timer late | compute | "
                  "watchdog trips | load avg |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        labels = {"no_added_load": "no added load",
                  "busy": "busy loops",
                  "busy_sched_fifo": "busy loops, node on SCHED_FIFO"}
        for key, label in labels.items():
            j = jit[key]
            cells = [f"{j[k]['p50']:.1f} / {j[k]['p99']:.1f}" for k in (
                "command_period_published_ms", "command_period_received_ms", "delivery_ms",
                "node_period_ms", "timer_late_ms", "compute_ms")]
            name = label if j["busy_processes"] == 0 else f"{j['busy_processes']} {label}"
            lines.append(f"| {name} | " + " | ".join(cells) +
                         f" | {j['watchdog_trips']} | {j['load_avg_1min'][0]:.1f} |")
    walk = r.get("go2_walk")
    if walk:
        lines += ["", f"Go2 walking policy under a {walk['command_vx_mps']} m/s forward command "
                  f"for {walk['seconds']:.0f} s: {walk['ros']['forward_distance_m']:.2f} m "
                  f"through ROS ({'fell' if walk['ros']['fell'] else 'upright throughout'}) "
                  f"against {walk['sim']['forward_distance_m']:.2f} m in simulation (mean of "
                  f"{walk['sim']['episodes']} envs, fall rate {walk['sim']['fall_rate']:.0%}): "
                  f"ratio {walk['forward_distance_ratio']:.2f}."]
    push = r.get("push")
    if push:
        ros, sim, lim = push["ros"], push["sim"], push["ros"]["command_limits"]
        pol = push["policy"]
        lines += ["", f"Push policy (panda_push, {pol['action']} actions at "
                  f"{1 / pol['control_dt']:.0f} Hz, seed {pol['seed']}, "
                  f"{pol['env_steps'] / 1e6:.1f}M env steps"
                  + (", trained with `task.deploy_limits`: the policy node's target filters "
                     "in the training env" if pol.get("deploy_limits") else "")
                  + ") through `sim_deploy` "
                  + "".join(f"with `{k}:={v}` " for k, v in push.get("node_params", {}).items())
                  + "on the "
                  f"same {ros['episodes']} starts (cube pose, goal) as in simulation: "
                  f"success {ros['success_rate']:.0%} through ROS against "
                  f"{sim['training_settings']['success_rate']:.0%} in simulation with the "
                  f"training settings: ratio {push['success_ratio']:.2f} (target >= 0.9); "
                  + (f"{sim['without_deploy_limits']['success_rate']:.0%} in simulation "
                     "without the filters; " if "without_deploy_limits" in sim else "")
                  + f"{sim['nominal_same_starts']['success_rate']:.0%} in simulation with "
                  f"nominal physics and no observation noise from the same starts, the same "
                  f"outcome as through ROS in {push['agreement_with_nominal_sim']:.0%} of the "
                  f"episodes. Control rate "
                  f"{ros['control_rate_hz']:.2f} Hz; {lim['commands']} arm commands, "
                  + ("none beyond a position limit" if not lim["max_beyond_position_limit_rad"]
                     else f"up to {lim['max_beyond_position_limit_rad']} rad beyond a "
                     "position limit") + ", largest share of a velocity limit "
                  f"{lim['max_velocity_share_of_limit']:.2f}, of an acceleration limit "
                  f"{lim['max_acceleration_share_of_limit']:.2f} (at it in "
                  f"{lim['steps_at_acceleration_limit']:.0%} of the steps); watchdog trips "
                  f"{ros['watchdog_trips']}, object pose stale {ros['object_stale']}; load "
                  f"average {ros['load_avg_1min'][0]:.1f}/{ros['load_avg_1min'][1]:.1f} "
                  f"({push['date'][:10]})."]
    return "\n".join(lines)


def vlm_reward(r: dict) -> str:
    v = r["vlm"]
    lines = [f"| tiny random VLM, {v['batch']} envs x {v['views']} views at {v['size']}x"
             f"{v['size']} | parameters | observations/s (frames/s), one generate per batch | "
             "one env per call | with the success question | scoring / rendering |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for family, m in v["models"].items():
        lines.append(f"| {family} | {m['parameters']:,} | {m['batched_obs_per_s']:.1f} "
                     f"({m['batched_frames_per_s']:.0f}) | {m['one_per_call_obs_per_s']:.1f} | "
                     f"{m['batched_with_success_obs_per_s']:.1f} | {m['score_over_render']:.2f} |")
    bt = r["bradley_terry"]
    lines += ["", "| Bradley-Terry reward, labels from sim progress | labelled pairs (strict) | "
              "held-out pairwise accuracy | VOC (expert) | Pearson vs sim | training |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for task, m in bt.items():
        if "val_pairwise_accuracy" not in m:
            continue
        e = m["eval"]
        lines.append(f"| {task} | {m['pairs']:,} ({m['train_pairs_used']:,}) | "
                     f"{m['val_pairwise_accuracy']:.3f} ({m['val_pairs']:,} pairs) | "
                     f"{e['voc']:.3f} | {e['progress_pearson']:.3f} | "
                     f"{m['seconds']['train']:.0f} s |")
    s, j = bt["scoring"], bt["tiny_vlm_judge"]
    lines += ["", f"Bradley-Terry scoring, {s['batch']} x 3 views at {s['size']}x{s['size']}: "
              f"{s['score_obs_per_s']:,.0f} observations/s, {s['score_over_render']:.0f}x the "
              f"rendering rate of the same observations ({s['render_obs_per_s']:,.0f}/s). A tiny "
              f"random SmolVLM as preference judge (both orders): {j['pairs_per_s']:.1f} pairs/s, "
              f"{j['unreadable_share']:.0%} of its answers unreadable (random weights). "
              f"({r['machine']['cores']} cores, {r['machine']['cpu']}, "
              f"{bt.get('date', r['date'])[:10]}; `{bt.get('command', r['command'])}`)"]
    if "server" in r:
        lines += ["", *vlm_server(r["server"])]
    return "\n".join(lines)


def vlm_server(v: dict) -> list[str]:
    """Labelling through ``transformers serve`` against the same tiny model loaded locally."""
    bounds = list(next(iter(v["protocols"].values()))["server"])
    lines = [f"Labelling {v['episodes']} panda_reach episodes ({v['frames']} frames x "
             f"{v['views']} views at {v['size']}x{v['size']}) as `embodied label` does, "
             f"tiny random models, {v['torch_threads']} torch thread locally and in the server "
             f"({v['date'][:10]}, `{v['command']}`): dataset frames/s, and requests in flight "
             "(mean, peak) through `transformers serve` at each bound on requests in flight.",
             "",
             "| protocol (tiny model) | local frames/s | "
             + " | ".join(f"server, {b} in flight: frames/s (x local), in flight" for b in bounds)
             + " |", "| --- | ---: |" + " ---: |" * len(bounds)]
    for name, m in v["protocols"].items():
        cells = [f"{s['frames_per_s']:.1f} (x{s['server_over_local']:.2f}), "
                 f"{s['mean_in_flight']:.1f} / {s['peak_in_flight']}"
                 for s in m["server"].values()]
        lines.append(f"| {name} ({m['family']}) | {m['local_frames_per_s']:.1f} | "
                     + " | ".join(cells) + " |")
    return lines


def gpu_backends(r: dict) -> str:
    lines = ["| backend (CPU device) | task | envs | env steps/s | engine alone steps/s | "
             "ratio to engine | C MuJoCo env steps/s | ratio to C MuJoCo | start-up s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("mujoco_warp", "isaaclab"):
        section = r.get(name) or {}
        for row in section.get("throughput", []):
            raw = row.get("raw_steps_per_s")
            raw_cells = ("| | |" if raw is None else
                         f"| {raw:,.0f} | {row['ratio_to_raw']:.2f} |")
            lines.append(
                f"| {name} | {row['task']} | {row['num_envs']:,} | "
                f"{row['env_steps_per_s']:,.0f} {raw_cells} "
                f"{row['c_mujoco_env_steps_per_s']:,.0f} | {row['ratio_to_c_mujoco']:.3f} | "
                f"{row['startup_s']:.1f} |")
        if section.get("skipped"):
            lines.append(f"| {name} | not measured: {section['skipped']} | | | | | | | |")
    cold = (r.get("mujoco_warp") or {}).get("cold_start_s")
    lines += ["", "| parity with C MuJoCo (same seeded actions, 4 envs) | action scale | steps "
              "| max abs qpos difference |", "| --- | ---: | ---: | ---: |"]
    for row in r.get("parity", []):
        lines.append(f"| {row['backend']} {row['task']} | {row['action_scale']} | "
                     f"{row['steps']} | {row['max_abs_qpos_diff']:.1e} |")
    loads = "; ".join(f"{name} {r[name]['load_average_at_start']:.1f} ({r[name]['date']})"
                      for name in ("mujoco_warp", "isaaclab")
                      if "load_average_at_start" in (r.get(name) or {}))
    lines += ["", (f"MuJoCo Warp start-up with an empty kernel cache: {cold:.0f} s. " if cold
                   else "") + f"Load average at the start of each section: {loads}. "
              f"({r['machine']['cores']} cores, {r['machine']['cpu']}; sections run with "
              "`python bench/gpu_backends.py --only SECTION`)"]
    return "\n".join(lines)


def offline(r: dict) -> str:
    def rate(o: dict) -> str:
        seeds = ", ".join(f"{x['success_rate']:.0%}" for x in o.get("per_seed", []))
        spread = f" ± {o['success_rate_std']:.1%} ({seeds})" if "success_rate_std" in o else ""
        return f"{o['success_rate']:.1%}{spread}"

    lines = [f"Every learner: `{r['action_space']}` actions, chunks of {r['chunk']} with "
             f"temporal ensembling, {r['gradient_steps']:,} gradient steps"
             + (f" (IQL: `algo.beta={r['iql_beta']}`)" if "iql_beta" in r else "")
             + f", mean of {r['seeds']} seeds, 64 evaluation episodes each.", "",
             "| data | learner | success (± std; per seed) | target | training per seed |",
             "| --- | --- | --- | --- | ---: |"]
    for key, task, target in (("push_expert_bc", "panda_push", 0.8),
                              ("pick_place_expert_bc", "panda_pick_place", 0.6)):
        if key in r:
            e, o = r[key], r[key]["bc"]
            train_s = fmean([x["train_seconds"] for x in o["per_seed"]])
            lines.append(f"| {task}: {e['episodes']} clean expert episodes (expert "
                         f"{e['expert_success']:.0%}) | BC | {rate(o)} | >= {target:.0%} | "
                         f"{train_s:.0f} s |")
    runs = r.get("offline") or {}
    for key, learner, labels, target in (
            ("bc", "BC", "", ""), ("rabc", "RA-BC", ", simulator progress", "> BC"),
            ("iql_true", "IQL", ", simulator progress", ">= 1.5x BC"),
            ("rabc_prm", "RA-BC", ", learned PRM", "> BC"),
            ("iql_prm", "IQL", ", learned PRM", ">= 1.5x BC, >= 0.8x IQL (true)"),
            ("iql_prm2", "IQL", ", second PRM (same recipe, seed 1)",
             ">= 1.5x BC, >= 0.8x IQL (true)")):
        if key in runs:
            o = runs[key]
            train_s = fmean([x["train_seconds"] for x in o["per_seed"]]) \
                if "per_seed" in o else o["train_seconds"]
            lines.append(f"| panda_push mixed{labels} | {learner} | {rate(o)} | {target} | "
                         f"{train_s:.0f} s |")
    if "dataset" in r:
        d, lab = r["dataset"], r["labelling"]
        sources = ", ".join(f"{k}: {v:.0%}" for k, v in d["success_by_source"].items())
        lines += ["", f"Mixed dataset: {d['episodes']:,} episodes, {d['frames']:,} frames, "
                  f"camera {', '.join(d['cameras'])} at {d['image_size'][0]}x"
                  f"{d['image_size'][1]}; success by source: {sources}."]
        rates = [f"{label} {lab[f'{key}_frames_per_s']:,.0f} / "
                 f"{lab[f'{key}_end_to_end_frames_per_s']:,.0f} frames/s"
                 for label, key in (("simulator progress", "oracle"), ("learned PRM", "prm"))
                 if lab.get(f"{key}_frames_per_s")]
        lines += ["", f"Labelling throughput, scoring loop / whole command: "
                  f"{'; '.join(rates)}."]
        if lab.get("prm_final_progress_success") is not None:
            lines[-1] += (f" The PRM's final-frame progress: "
                          f"{lab['prm_final_progress_success']:.2f} in successful episodes, "
                          f"{lab['prm_final_progress_failure']:.2f} in failed ones.")
        for key, name in (("prm", "The PRM"), ("prm2", "The second PRM")):
            held, own = lab.get(f"{key}_held_out"), lab.get(f"{key}_on_dataset")
            if held and own:
                lines[-1] += (f" {name}'s Pearson with the simulator's progress: "
                              f"{held['progress_pearson']:.2f} on its held-out episodes, "
                              f"{own['pearson']:.2f} on the dataset's {own['frames']:,} frames.")
        if r.get("iql_prm_over_iql_true") is not None and runs["bc"]["success_rate"] > 0:
            bc = runs["bc"]["success_rate"]
            prms = ", ".join(f"{runs[k]['success_rate'] / runs['iql_true']['success_rate']:.2f}"
                             f" ({runs[k]['success_rate'] / bc:.2f}x BC)"
                             for k in ("iql_prm", "iql_prm2") if k in runs)
            lines += ["", f"IQL on PRM labels / IQL on the simulator's progress: {prms}; "
                      f"IQL on the simulator's progress: {r['iql_true_over_bc']:.2f}x BC."]
        d3 = r.get("d3rlpy_iql") or {}
        lines += ["", f"IQL gradient steps/s: {r['iql_steps_per_s']:.1f}" + (
            f" against {d3['steps_per_s']:.1f} for d3rlpy {d3['version']}'s IQL on the same "
            f"transitions ({r['iql_steps_per_s_ratio_to_d3rlpy']:.2f}x)." if "steps_per_s" in d3
            else " (d3rlpy not measured).")]
    dates = "; ".join(f"{part} {date} ({r['part_seconds'][part] / 60:.0f} min)"
                      for part, date in (r.get("part_dates") or {}).items())
    lines += ["", f"({r['machine']['cores']} cores, {r['machine']['cpu']}, shared with other "
              f"jobs; parts measured: {dates})"]
    return "\n".join(lines)


def distributed(r: dict) -> str:
    t, lab = r["train"], r["label"]

    def crossing(run: dict, target: int) -> str:
        wall, steps = run[f"wall_s_to_{target}"], run[f"env_steps_to_{target}"]
        return f"not reached in {run['env_steps']:,} steps" if wall is None else \
            f"{wall:,.0f} s ({steps:,} steps)"

    lines = ["| processes x envs | env steps/s | collection / learning steps/s | to 80% train "
             "success | to 95% train success | final deterministic success |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for run in t["runs"].values():
        lines.append(
            f"| {run['processes']} x {run['envs_per_process']} | {run['env_steps_per_s']:,.0f} | "
            f"{run['collection_steps_per_s']:,.0f} / {run['learning_steps_per_s']:,.0f} | "
            f"{crossing(run, 80)} | {crossing(run, 95)} | "
            f"{run['eval_success']:.0%} |")
    lines += ["", "| labelling processes | frames/s (scoring loop) | frames/s (whole command) |",
              "| --- | ---: | ---: |"]
    for run in lab["runs"].values():
        lines.append(f"| {run['processes']} | {run['frames_per_s']:,.0f} | "
                     f"{run['command_frames_per_s']:,.0f} |")
    lines += ["", f"Scaling efficiency (2-process rate / twice the 1-process rate): training "
              f"{t['scaling_efficiency']:.2f} (a {t['speedup']:.2f}x speed-up), labelling "
              f"{lab['scaling_efficiency']:.2f}; the "
              f"2-process labelled dataset is "
              f"{'byte-identical' if lab['identical_output'] else 'NOT identical'} "
              f"to the 1-process one. Load average at the start {r['load_average_at_start']:.1f} "
              f"({r['machine']['cores']} cores, {r['machine']['cpu']}; whole run "
              f"{r['seconds'] / 60:.0f} min)"]
    return "\n".join(lines)


TABLES = {"sim_throughput": sim_throughput, "ppo": ppo, "reward_model": reward_model,
          "reward_rl": reward_rl, "offline": offline, "ros_loop": ros_loop,
          "vlm_reward": vlm_reward, "gpu_backends": gpu_backends, "distributed": distributed}

TITLES = {
    "sim_throughput": "Simulation throughput (`python bench/sim_throughput.py`)",
    "ppo": "PPO against stable-baselines3 (`python bench/ppo.py`)",
    "reward_model": "Learned PRM: quality, scoring speed, cost in PPO "
                    "(`python bench/reward_model.py`)",
    "reward_rl": "The sparse-reward experiment (`python bench/reward_rl.py`)",
    "offline": "Offline learning on panda_push (`python bench/offline.py`)",
    "ros_loop": "ROS 2 bridge in closed loop (`python bench/ros_loop.py`)",
    "vlm_reward": "VLM rewards and the Bradley-Terry preference model "
                  "(`python bench/vlm_reward.py`)",
    "gpu_backends": "GPU backends on this CPU (`python bench/gpu_backends.py`)",
    "distributed": "Data-parallel training and labelling under torchrun "
                   "(`python bench/distributed.py`)",
}

# What each section measures, in words; the numbers come from the JSON files only.
INTROS = {
    "sim_throughput": (
        "Env control steps/s with zero actions (physics, action mapping and latency, all "
        "observation, reward, success and progress terms, auto-reset) against raw "
        "`mujoco.batch` stepping of the same compiled model from the same states with the "
        "same 4 substeps. The target is a ratio of at least 0.7 at 256 envs. A single env "
        "pays 0.8 ms (reach) to 1.7 ms (push, go2) of fixed Python/torch cost per step: "
        "batch envs, do not loop over single ones."),
    "ppo": (
        "Deterministic success (64 evaluation episodes every 20k env steps, evaluation "
        "time excluded) against training wall-clock on `panda_reach`, each contender over "
        "three seeds: ours; rsl_rl (rsl-rl-lib 5.5.1 with our shipped settings, through "
        "`bench/peers/rsl_rl_adapter.py` in the venv `scripts/peer_env.sh rsl_rl` makes); "
        "SB3 PPO with its documented defaults; SB3 PPO tuned to our batch settings. Seed "
        "by seed every contender runs in turn (ours, rsl_rl, SB3 tuned, SB3 defaults). "
        "Wall-clock on this shared machine follows its load: the CPU column is each "
        "contender's process CPU seconds over the same spans as its training clock, the "
        "load column the 1-minute load average at its evaluations. Targets (wall-clock): "
        "rsl_rl's time over ours >= 1.0, SB3 tuned's >= 3.0. The `panda_push` table has one "
        "row per action space, each with the settings it trained with and its date (3M env steps, "
        "each training capped at 1800 s; the seeds, load and ran columns). The shipped row, "
        "`ee_delta_yaw_closed` (closed fingers with yaw, the reward with `push_low`, tapered "
        "`push_progress` and `goal_rest`, the learning rate falling linearly over the run, "
        "gamma 0.95 and no value-loss clip), "
        "has 3 seeds. The `ee_delta` row (3 seeds) and the `joint_delta` and `joint_position` rows "
        "(1 seed each, seed 0) trained the settings shipped before it (a gripper action, the "
        "reward without those three terms), the joint rows with only `task.action` changed. "
        "Rows are independent: `--only panda_push --push-actions <space> --push-seeds N` "
        "replaces only that space's row. Where the cap stopped a seed before 3M env steps, "
        "the mean curve ends at the last evaluation all its seeds share. Every row misses "
        "the 90% target. The `panda_pick_place` row trains the shipped settings "
        "(`configs/algo/ppo/panda_pick_place.yaml`, 5M env steps) over 3 seeds, each capped "
        "at 3600 s, evaluated 20 times on 64 episodes (targets: 80% within 20M env steps "
        "and 60 minutes). The `go2_walk` line "
        "trains the shipped settings within 30 min and meets its target (walks forward "
        "steadily). Sections are rerun with `--only <section>`, which merges them into the "
        "same JSON (each records its date)."),
    "reward_model": (
        "`bench/reward_model.py` trains the learned PRM for each Panda task (`--reuse-prm` "
        "keeps earlier ones) and reports its held-out metrics, its scoring speed (256 "
        "observations x 3 views, one and two threads, against the plain network and the "
        "renderer in the same run) and PPO collection speed with the PRM in the loop. The "
        "visual-shift tables score two PRMs trained alike, one on frames under visual "
        "randomisation (`visual=train`, the default) and one without (`visual=none`), on "
        "the same fresh episodes under each kind of shift (ranges at and past the edges of "
        "the training ranges; `configs/commands/reward_eval.yaml`). Targets under shift: "
        "success F1 >= 0.85, progress Pearson >= 0.85. The load average is recorded: the "
        "two cores were shared with other jobs."),
    "reward_rl": (
        "Sparse success reward against PRM shaping, shaping by the simulator's true "
        "progress and the task's dense reward, with the same seeds and budget per task, "
        "the task's shipped PPO settings and deterministic evaluation on 64 episodes "
        "(`--task`, `--seeds`, `--reuse-runs`). Discussed in "
        "[the experiment's notes](experiments/2026-11-22-prm-reward-in-rl.md); the shaping "
        "weight and the online PRM refresh in [the shaping-design "
        "notes](experiments/2026-11-24-prm-shaping-design.md), the shaping in PPO's "
        "advantages in [the advantage-shaping "
        "notes](experiments/2026-11-24-prm-advantage-shaping.md), the PRM the benchmark "
        "builds (a dense run's rollouts in its data) and the refresh every 2 rollouts in "
        "[the reproducible-PRM notes](experiments/2026-11-25-prm-reach-reproducible.md). "
        "Every run saves a checkpoint every 8 PPO iterations and each is evaluated "
        "deterministically on 64 episodes: env steps to 80% / 95% are the first checkpoint "
        "at which the mean over seeds reaches them, and twice the oracle's steps to 80% is "
        "the budget the PRM arm is judged at ([the budget "
        "notes](experiments/2026-11-25-prm-reach-budget.md)). "
        "Collection steps/s are over the whole run; the ratio only against a sparse arm "
        "of the same run."),
    "offline": (
        "BC on clean scripted-expert episodes of `panda_push` and `panda_pick_place`; a "
        "mixed-quality `panda_push` dataset collected by the benchmark (three views), "
        "labelled `prm+sparse` from the simulator's progress and from a learned PRM (`--prm`, "
        "else one trained by the benchmark's recipe; `--prm2` a second one), "
        "then BC, RA-BC and IQL trained on it; all evaluated in simulation. With "
        "`--d3rlpy-python` it also times d3rlpy's IQL on the same transitions (d3rlpy in its "
        "own venv: `scripts/peer_env.sh d3rlpy`). Discussed in "
        "[the experiment's notes](experiments/2026-11-24-offline-prm-labels-and-finetune.md)."),
    "ros_loop": (
        "The Panda reach policy through `sim_deploy` (policy node and simulated robot in "
        "two processes, real DDS, private network namespace) against the same exported "
        "policy in simulation: success after the task's 150 control steps (each episode "
        "deactivates the node, resets the arm, activates the node), the policy "
        "node's control-step jitter and compute time, and the latency from the robot's "
        "newest state message to each command's arrival; and the Go2 walking "
        "policy's forward distance through ROS against simulation under the same command; "
        "and a panda_push policy (`--push-policy`) on the same starts through ROS and in "
        "simulation ([the push notes](experiments/2026-11-24-ros-push.md), [with the current "
        "settings](experiments/2026-11-25-ros-push-current.md)). "
        "Measured on a machine shared with trainings (the load average is recorded), so "
        "the p99 figures include waiting for a CPU. The jitter table runs the robot "
        "deployment (policy node on its own 50 Hz timer, wall time) beside added "
        "busy-loop processes, and with the node's threads on SCHED_FIFO; the command "
        "period is taken from each command's DDS source and reception timestamps. "
        "Discussed in [the jitter notes](experiments/2026-11-24-ros-jitter.md)."),
    "vlm_reward": (
        "No pretrained VLM weights were available, so the VLM rows are tiny random models: "
        "the overhead of the plumbing, not a real VLM's speed, and nothing about judgement "
        "quality. The run was on a heavily shared machine (load average about 9 on 2 "
        "cores), which is why rendering measured so slowly in it. The server rows run "
        "`transformers serve` on the same CPU: a tiny model's compute is small next to the "
        "HTTP, PNG and per-request processing, so they show that the client keeps the "
        "server busy and what a round trip costs, not what a GPU server gives a real "
        "model."),
    "gpu_backends": (
        "MuJoCo Warp and Isaac Lab on Warp's CPU device (there is no GPU here: GPU speed "
        "is not measured), against the bare engine and against C MuJoCo on the same task "
        "and envs in the same run, and parity with C MuJoCo under the same seeded actions. "
        "See [installation](installation.md#simulation-backends) for what to expect on a "
        "GPU."),
    "distributed": (
        "`embodied train task=panda_reach` with the shipped settings and 128 envs in total: "
        "one process with 128 envs against two torchrun processes (gloo, one thread each) "
        "with 64 envs each, the same iterations; and `embodied label` of a collected "
        "dataset with a small learned PRM, one process against two. Both processes run "
        "on the same 2 cores (shared with other jobs: see the load average), so the "
        "scaling efficiency shows the cost of the mechanism and of the contention, not "
        "what a second GPU or node adds; NCCL and GPUs were not available. With one thread "
        "per process, one process uses one core and two use both, hence a speed-up at all. "
        "Success is "
        "the training success rate of the stochastic policy over the recent episodes; "
        "the final one is the deterministic policy on 64 episodes."),
}

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
HEADER = """<!-- Generated from bench/results/*.json by `python bench/report.py --write`. -->
# Benchmarks

Every benchmark in `bench/` takes `--quick` (a smoke run) and writes
`bench/results/<name>.json`. This page is generated from the full-run files by
`python bench/report.py --write`; `python bench/report.py --check` (run by the test suite)
fails when it is out of date. Speeds are ratios to a reference measured in the same run,
on a shared 2-core machine (absolute numbers vary by up to ~1.5x between runs).
"""


def full_runs() -> dict[str, dict]:
    """The full-run results by benchmark name; a file without a table is an error."""
    runs = {}
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text())
        if result.get("quick"):
            continue
        name = result.get("benchmark", path.stem)
        if name not in TABLES:
            raise SystemExit(f"{path.name}: no table for benchmark {name!r} in bench/report.py")
        runs[name] = result
    return runs


def render() -> str:
    """The whole benchmarks document, one section per full-run JSON file."""
    runs = full_runs()
    parts = [HEADER]
    for name in TABLES:
        if name not in runs:
            continue
        r = runs[name]
        recorded = f"Last recorded by `{r['command']}` on {r['date'][:10]}."
        intro = textwrap.fill(INTROS[name], width=90, break_on_hyphens=False,
                              break_long_words=False)
        parts.append(f"## {TITLES[name]}\n\n{intro}\n\n{recorded}\n\n"
                     f"{TABLES[name](r)}\n")
    return "\n".join(parts)


def main() -> None:
    """Print the document; --write writes docs/benchmarks.md; --check compares it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if docs/benchmarks.md differs from the JSON files")
    args = parser.parse_args()
    text = render()
    if args.write:
        DOC.write_text(text)
        print(f"updated {DOC.relative_to(ROOT)}")
    elif args.check:
        if not DOC.exists() or DOC.read_text() != text:
            raise SystemExit(f"{DOC.relative_to(ROOT)} is out of date with bench/results: "
                             "run `python bench/report.py --write`")
        print(f"{DOC.relative_to(ROOT)} is up to date")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
