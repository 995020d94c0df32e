"""ios_bench.running.context: what the sweep's steps share."""

from tests.round_fakes import FakeExecutor, context


def test_context_names_its_folder_and_whether_tasks_run_here(tmp_path):
    ctx, said = context(tmp_path)
    assert ctx.folder == tmp_path and ctx.local
    ctx.say("hello")
    assert said == ["hello"]
    remote, _ = context(tmp_path, FakeExecutor(name="ray"))
    assert not remote.local
