"""benchmarks/bench_transformers.py: the sweep it runs and the stage shape it reads from a schedule file."""

from __future__ import annotations

import json

from benchmarks import bench_transformers as bt


def test_stage_shape_counts_stages_and_the_widest_ones_groups_and_operators(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"blocks": [{"stages": [[["a"]], [["b", "c"], ["d"]]]},
                                        {"stages": [[["e"], ["f"], ["g"]], [["h", "i", "j", "k"]]]}]}))
    assert bt.stage_shape(f) == (4, 3, 3)  # the 3-group stage is the widest, not the 4-operator chain
    assert bt.stage_shape(tmp_path / "missing.json") is None
    (tmp_path / "empty.json").write_text(json.dumps({"blocks": [{}]}))
    assert bt.stage_shape(tmp_path / "empty.json") is None


def test_the_sweep_is_one_run_of_both_networks_with_ios_on_every_provider(capsys):
    assert bt.main(["--dry-run", "--out", "x"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[cmd.index("--models") + 1] == "vit_tiny,convnext_tiny" and cmd[cmd.index("--batch") + 1] == "1,16"
    assert cmd[cmd.index("--ios-providers") + 1] == "torch,onnxruntime,openvino"
    assert cmd[cmd.index("--schedules") + 1] == "sequential,both"
