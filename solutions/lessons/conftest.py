"""nbval runs cells with store_history=False, and IPython then ignores a trailing `;`
(nbval issue #194): a plot cell ending in `;` would show its last value under nbval
but not in JupyterLab. Run cells as JupyterLab does, with history on."""

from nbval.kernel import RunningKernel


def _execute_like_jupyterlab(self, cell_input, allow_stdin=None):
    return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)


RunningKernel.execute_cell_input = _execute_like_jupyterlab
