"""The plan a run streams: one task per step of the loop, each completed as the next starts."""

from __future__ import annotations

from bot.streaming.plan import DETAIL_LINE_MAX, DETAILS_MAX, TITLE_MAX, Plan
from grading import RubricEvaluation


def evaluation(iteration: int, failing: list[str], passing: list[str]) -> RubricEvaluation:
    criteria = [{"name": n, "passed": False, "gap": "", "score": None} for n in failing]
    criteria += [{"name": n, "passed": True, "gap": "", "score": None} for n in passing]
    return RubricEvaluation(
        grading_run_id="g1",
        iteration=iteration,
        max_iterations=3,
        kind="list",
        result="needs_revision" if failing else "satisfied",
        explanation="",
        criteria=criteria,  # type: ignore[typeddict-item]
        unmatched=[],
        score=None,
        verdict=None,
        usage=None,
    )


def steps(chunks: list) -> list[tuple[str, str, str]]:
    return [(c.id, c.title, c.status) for c in chunks if c.type == "task_update"]


def test_each_step_completes_the_task_before_it_and_names_what_the_grader_found():
    plan = Plan()
    first = evaluation(0, ["Cites a source"], ["Is polite", "Is short"])

    assert [c.type for c in plan.start()] == ["plan_update", "task_update"]
    assert steps(plan.grading(0, 3)) == [
        ("draft", "Writing a draft", "complete"),
        ("grade-1", "Grading iteration 1/3", "in_progress"),
    ]
    assert steps(plan.graded(first)) == [
        ("grade-1", "Grading iteration 1/3: 2 of 3 criteria met", "complete")
    ]
    assert steps(plan.revising(first)) == [("revise-1", "Revising: Cites a source", "in_progress")]
    assert steps(plan.grading(1, 3))[0] == ("revise-1", "Revising: Cites a source", "complete")
    assert steps(plan.graded(evaluation(1, [], ["Cites a source"]))) == [
        ("grade-2", "Grading iteration 2/3: all met", "complete")
    ]
    assert plan.close() == []  # nothing left in progress


def test_a_run_without_grading_closes_its_draft_and_a_failed_grader_is_an_error():
    plan = Plan()
    plan.start()
    assert steps(plan.close()) == [("draft", "Writing a draft", "complete")]
    failed = {**evaluation(0, [], []), "result": "grader_error"}
    assert steps(plan.graded(failed)) == [("grade-1", "Grading iteration 1/3: the grader failed", "error")]  # type: ignore[arg-type]


def test_criterion_names_are_shown_on_one_line_and_shortened():
    plan = Plan()
    plan.start()
    long_names = [f"Criterion\nnumber {n} " + "x" * 40 for n in range(10)]
    ((_, title, _),) = steps(plan.revising(evaluation(0, long_names, [])))[1:]
    assert "\n" not in title and len(title) <= TITLE_MAX


def test_a_criterion_the_grader_could_not_tell_is_neither_met_nor_named_for_revision():
    plan = Plan()
    plan.start()
    plan.grading(0, 3)
    cannot_tell = {"name": "Cites a source", "passed": False, "gap": "", "score": None, "cannot_tell": True}
    first = evaluation(0, ["Is short"], ["Is polite"])
    first["criteria"].append(cannot_tell)  # type: ignore[arg-type]
    satisfied = evaluation(1, [], ["Is polite"])
    satisfied["criteria"].append(cannot_tell)  # type: ignore[arg-type]

    assert steps(plan.graded(first)) == [
        ("grade-1", "Grading iteration 1/3: 1 of 2 criteria met, 1 can't tell", "complete")
    ]
    assert steps(plan.revising(first)) == [("revise-1", "Revising: Is short", "in_progress")]
    plan.grading(1, 3)
    [graded] = steps(plan.graded(satisfied))
    assert graded == ("grade-2", "Grading iteration 2/3: all met, 1 can't tell", "complete")
    assert "not met" not in graded[1]


def test_a_graded_task_says_its_verdict_and_the_gaps_of_what_failed_or_is_left_to_a_person():
    plan = Plan()
    plan.start()
    graded = evaluation(0, ["Cites a source"], ["Is polite"])
    graded["criteria"][0]["gap"] = "No\nsource is named."
    graded["criteria"].append({"name": "Is kind", "passed": False, "gap": "Unclear.", "cannot_tell": True})  # type: ignore[typeddict-item]

    (task,) = plan.graded(graded)

    assert task.output == "Needs revision"
    assert task.details == "Failed: Cites a source — No source is named.\nCan’t tell: Is kind — Unclear."
    (passed,) = plan.graded(evaluation(1, [], ["Cites a source"]))
    assert passed.output == "Passed: the rubric is satisfied" and passed.details is None


def test_a_graded_tasks_details_stay_within_their_bounds():
    plan = Plan()
    plan.start()
    graded = evaluation(0, [f"Criterion {n}" for n in range(30)], [])
    for criterion in graded["criteria"]:
        criterion["gap"] = "g" * 500

    (task,) = plan.graded(graded)

    assert len(task.details) <= DETAILS_MAX
    assert all(len(line) <= DETAIL_LINE_MAX for line in task.details.splitlines())


def test_the_draft_task_names_what_the_worker_read_with_each_file_a_source():
    plan = Plan()
    plan.start()
    files = [("notes.pdf", "https://files.slack.test/notes.pdf"), ("plan.txt", None)]

    (draft,) = plan.reading(files, 3)
    (done, _) = plan.grading(0, 3)

    assert draft.details == "Read 3 earlier messages of this thread and 2 files: notes.pdf, plan.txt"
    assert [s.to_dict() for s in draft.sources] == [
        {"type": "url", "url": "https://files.slack.test/notes.pdf", "text": "notes.pdf"}
    ]
    assert (done.status, done.details) == ("complete", draft.details)  # kept as the draft is done
    assert plan.reading(files, 3) == []  # nothing to say once the draft is done
    assert Plan().reading([], 0) == []
