"""An executed notebook keeps each progress bar's last state once (rev.book.outputs)."""
import nbformat

from rev.book.outputs import clean_streams, terminal_text


def test_a_bar_leaves_nothing_and_escapes_and_repeats_go():
    bar = ("train:   0%|   | 0/50\rtrain:  40%|#  | 20/50\rtrain: 100%|###| 50/50\n"
           "train: 100%|###| 50/50\n" "inner:  50%|#  | 1/2\x1b[A\n" "\x1b[A\r      \r\n" "done\n")
    assert terminal_text(bar) == "done\n"
    assert terminal_text("12story [00:01, 8.20story/s]\nkept 12 stories\n") == "kept 12 stories\n"
    assert terminal_text("a 50% | b | c\n") == "a 50% | b | c\n"   # a percentage in a table is no bar
    plain = "step 1\nstep 1\n\nno bars here\n"
    assert terminal_text(plain) == plain    # text without bars is left as it was, repeats and blank lines too


def test_the_executed_copy_is_rewritten_and_an_emptied_output_dropped(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a 0%\ra 100%\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="\x1b[A\r   \r"),
                    nbformat.v4.new_output("stream", name="stdout", text="loss 1.5\n")]
    nb.cells.append(cell)
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    assert clean_streams(path) > 0
    outs = nbformat.read(str(path), as_version=4).cells[0].outputs
    assert [o["text"] for o in outs] == ["a 100%\n", "loss 1.5\n"]   # a redrawn line that is no bar stays


def test_redraws_saved_as_one_output_each_become_one_line(tmp_path):
    """The kernel can send each redraw of a bar as its own stream output: the saved cell shows the last one."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("train()")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=t)
                    for t in ("\rrun:   0%| 0/80", "\rrun:  50%| 40/80", "\rrun: 100%| 80/80", "\n")]
    cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text="reusing run 1\n"))
    nb.cells.append(cell)
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    clean_streams(path)
    outs = nbformat.read(str(path), as_version=4).cells[0].outputs
    assert [(o["name"], o["text"]) for o in outs] == [("stdout", "reusing run 1\n")]


def test_the_site_folds_a_solution_without_its_course_marks():
    from rev.book.site import prepare_notebook

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    cell.metadata["tags"] = ["solution"]
    nb.cells.append(cell)
    shown = prepare_notebook(nb, "badge.svg").cells[0]
    assert shown.source == "def f():\n    return 1\n" and "hide-input" in shown.metadata["tags"]


def test_noise_lines_find_paths_booleans_and_reprs_but_not_sentences():
    from rev.book.outputs import noise_lines

    def cell(*texts, markdown=None):
        outs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
        if markdown is not None:
            outs.append(nbformat.v4.new_output("display_data", data={"text/markdown": markdown, "text/plain": "<x>"}))
        return nbformat.v4.new_code_cell("x", outputs=outs)

    nb = nbformat.v4.new_notebook(cells=[
        cell("reused the run in /work/main/build/ci/results/run1\n"),
        cell("one step lowered the loss: True\n", "chosen: {'trunk': 'reveuler_rev', 'h': 1.0}\n"),
        cell("Plan(t=8, sp=True)\n"),
        cell("✓ one step lowered the loss\n", "saved as run1 (https://example.org/a/b)\n",
         "reused the run (train with resume=False to redo it)\n", "leaf = s.detach().requires_grad_(True)\n",
             markdown="True to the model, the loss fell."),
    ])
    found = noise_lines(nb, "nb")
    assert [line.split(": ")[1] for line in found] == ["a machine path", "a Python boolean", "a dict repr",
                                                       "a dataclass repr"]
    assert all(not line.startswith("nb, cell 3") for line in found)   # sentences, URLs, prose


def test_a_cells_plain_text_result_is_read_for_noise_too():
    """A dict or dataclass left as a cell's result is an execute_result holding only text/plain: read like a
    printed line (a result that also carries Markdown is prose, and is not)."""
    from rev.book.outputs import noise_lines

    def result(data):
        return nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("execute_result", data=data,
                                                                               execution_count=1)])

    nb = nbformat.v4.new_notebook(cells=[result({"text/plain": "{'trunk': 'reveuler_rev', 'h': 1.0}"}),
                                         result({"text/plain": "Plan(batch=8, slices=2)"}),
                                         result({"text/plain": "{'a': 1}", "text/markdown": "**True** to form"})])
    assert [line.split(": ")[1] for line in noise_lines(nb, "nb")] == ["a dict repr", "a dataclass repr"]


def _printed(*texts):
    return nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stdout", text=t)
                                                   for t in texts])


def _kinds(nb):
    from rev.book.outputs import noise_lines

    return [line.split(": ")[1] for line in noise_lines(nb, "nb")]


def test_noise_lines_find_each_kind_of_residue_the_strict_read_saw():
    nb = nbformat.v4.new_notebook(cells=[
        _printed("reusing the finished run in results/cpu/run1_baseline\n"),
        _printed("the trace trace.revtrace holds 40 steps\n"),
        _printed("profile 'cpu'\n"),
        _printed("profile 'cpu': 700,000 tokens in batches of 16\n"),
        _printed("the prefix is 6 tokens: [12, 7, 301, 4, 9, 22]\n"),
        _printed("run:  40%|####      | 20/50 [00:03<00:04, 6.1it/s]\n"),
        _printed("assert 0.9586482048034668 >= 0.999\n"),
        _printed("parameters: 635563837\n"),
        _printed("trained for 10000 steps\n"),     # five digits, the shortest count the rule takes
    ])
    assert _kinds(nb) == ["a relative path", "a relative path", "a quoted repr", "a quoted repr", "a list repr", "a progress bar",
                          "a raw assert", "an unformatted number", "an unformatted number"]


def test_noise_lines_leave_what_a_reader_may_see():
    """The lines each rule must not take: a separated count, a year, a float, a seed in a name, a short list, a
    quoted word inside a sentence, a path-like ratio, an error message naming a file beside its folder."""
    nb = nbformat.v4.new_notebook(cells=[_printed(
        "parameters: 635,563,837\n", "as Korthikanti et al. 2022 measured\n", "error 1.2345678e-05\n",
        "run seed_12345-a\n", "depths 2, 4 and 8\n", "ratio 12/34567\n", "the word 'fixed' names a stream here\n",
        "[1, 2, 3]\n", "0.123456 of the budget\n", "trained for 9999 steps\n")])   # four digits: left
    assert _kinds(nb) == []


def test_a_line_printed_twice_is_found_in_the_same_cell_and_across_cells_but_not_a_table_row():
    line = "each step runs 2 slices of 8 sequences (free on a CPU)\n"
    table = "midpoint_rev   fp32   4.619   yes\n"
    nb = nbformat.v4.new_notebook(cells=[_printed(line, line), _printed(line), _printed(table), _printed(table),
                                         _printed("short line\n", "short line\n"),
                                         _printed("a" * 29 + "\n", "a" * 29 + "\n"),      # one below REPEAT_MIN
                                         _printed("b" * 30 + "\n", "b" * 30 + "\n")])     # at it: a repeat
    found = [f.split(": ")[0] for f in __import__("rev.book.outputs", fromlist=["x"]).noise_lines(nb, "nb")]
    assert found == ["nb, cell 0", "nb, cell 1", "nb, cell 6"]
    md = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": "- **Memory**: 38.0 MiB against 126.1 MiB at batch 16", "text/plain": "<x>"})
        for _ in range(2)])
    assert _kinds(nbformat.v4.new_notebook(cells=[md])) == ["a line printed twice"]
