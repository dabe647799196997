"""An executed notebook keeps each progress bar's last state once (rev.book.outputs)."""
import nbformat

from rev.book.outputs import clean_streams, terminal_text


def test_a_bar_keeps_its_last_state_and_escapes_and_repeats_go():
    bar = ("train:   0%|   | 0/50\rtrain:  40%|#  | 20/50\rtrain: 100%|###| 50/50\n"
           "train: 100%|###| 50/50\n" "inner:  50%|#  | 1/2\x1b[A\n" "\x1b[A\r      \r\n" "done\n")
    assert terminal_text(bar) == "train: 100%|###| 50/50\ninner:  50%|#  | 1/2\ndone\n"
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
    assert [o["text"] for o in outs] == ["a 100%\n", "loss 1.5\n"]


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
    assert [(o["name"], o["text"]) for o in outs] == [("stderr", "run: 100%| 80/80\n"), ("stdout", "reusing run 1\n")]


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
        cell("✓ one step lowered the loss\n", "saved in results/smoke/run1 (https://example.org/a/b)\n",
         "reused the run (train with resume=False to redo it)\n", "leaf = s.detach().requires_grad_(True)\n",
             markdown="True to the model, the loss fell."),
    ])
    found = noise_lines(nb, "nb")
    assert [line.split(": ")[1] for line in found] == ["a machine path", "a Python boolean", "a dict repr",
                                                       "a dataclass repr"]
    assert all(not line.startswith("nb, cell 3") for line in found)   # sentences, relative paths, URLs, prose


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
