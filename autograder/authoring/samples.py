"""Write the bundled sample submissions: autograder/sample_submissions/<student>/<lesson>/.

Each sample is a learner's notebook from course/ filled in as a learner would hand it in:

    ada  every lesson, perfect (the reference code in each exercise cell)
    ben  every lesson, with typical mistakes from the catalogue (MISTAKE_EDITS below)
    cho  every lesson, the untouched stub
    dev  03_attention, perfect, but one test cell deleted (nbgrader restores it)
    eve  03_attention as a corrupt file (cut short), 01_embedding perfect
    fay  03_attention, a correct solution that prints a warning while the tests run

    python -m autograder.authoring.samples        # after changing a lesson or its exercises
"""

import shutil
import sys
from pathlib import Path

import nbformat

from autograder import lessons
from autograder.capstone import learner_code

SAMPLES = Path(__file__).resolve().parent.parent / "sample_submissions"

# lesson -> [(exercise, text in the reference code, what the learner wrote instead)]
MISTAKE_EDITS = {
    "01_embedding": [
        ("Embedding", "return self.lut(tokens) * math.sqrt(self.d_model)", "return self.lut(tokens)")
    ],
    "02_positional_encoding": [
        (
            "sinusoidal_encoding",
            "pe[:, 0::2] = torch.sin(position * frequency)  # [max_len, D/2]\n    pe[:, 1::2] = torch.cos(",
            "pe[:, 0::2] = torch.cos(position * frequency)  # [max_len, D/2]\n    pe[:, 1::2] = torch.sin(",
        )
    ],
    "03_attention": [
        (
            "scaled_dot_product_attention",
            "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
            "scores = q @ k.transpose(-2, -1)",
        ),
    ],
    "04_masking": [
        (
            "decoder_mask",
            "padding_mask(tokens, pad_id) & causal_mask(",
            "padding_mask(tokens, pad_id) | causal_mask(",
        ),
    ],
    "05_multi_head": [
        (
            "split_heads",
            "return x.view(batch, seq_len, n_heads, d_model // n_heads).transpose(1, 2)",
            "return x.view(batch, n_heads, seq_len, d_model // n_heads)",
        )
    ],
    "06_layer_norm": [
        (
            "LayerNorm",
            "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
            "var = x.var(dim=-1, keepdim=True)",
        )
    ],
    "07_feed_forward": [
        (
            "PositionwiseFeedForward",
            "return self.linear2(self.dropout(self.activation(self.linear1(x))))",
            "return self.linear2(self.dropout(self.linear1(x)))",
        )
    ],
    "08_encoder_decoder": [
        (
            "EncoderLayer",
            "x = self.norm2(x + self.dropout2(self.ffn(x)))",
            "x = self.norm2(self.dropout2(self.ffn(x)))",
        )
    ],
    "09_output_layer": [
        ("Generator", "torch.log_softmax(self.proj(x), dim=-1)", "torch.softmax(self.proj(x), dim=-1)"),
        ("greedy_decode", "model.generator(out[:, -1])", "model.generator(out[:, 0])"),
    ],
    "10_training": [("sequence_loss", "return loss[keep].sum() / keep.sum()", "return loss.mean()")],
    "11_efficiency": [
        (
            "cached_greedy_decode",
            "x = model.tgt_embed(ys[:, -1:]) + pe[t]",
            "x = model.tgt_embed(ys[:, -1:]) + pe[0]",
        )
    ],
    "12_libtorch": [
        (
            "CppMultiHeadAttention",
            "x.view({batch, x.size(1), h, d_k}).transpose(1, 2)",
            "x.view({batch, h, x.size(1), d_k})",
        )
    ],
}
DELETED_CELL = ("03_attention", "test_scaled_dot_product_attention_mask")
WARNING_LINE = '    import warnings\n\n    warnings.warn("this could be faster", UserWarning, stacklevel=1)\n'


def filled(lesson: str, edits: list[tuple[str, str, str]] = (), warn: bool = False) -> nbformat.NotebookNode:
    nb = nbformat.read(lessons.course_path(lesson), as_version=4)
    for cell in nb.cells:
        exercise = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        code = learner_code(exercise)
        for target, old, new in edits:
            if target == exercise:
                if old not in code:
                    raise ValueError(
                        f"{lesson}/{exercise}: the mistake edit's text {old!r} is not in the reference"
                    )
                code = code.replace(old, new)
        if warn:
            head, _, body = code.partition('    """\n')  # after the docstring
            code = head + '    """\n' + WARNING_LINE + body
        cell.source = code
    return nb


def write_samples(folder: Path = SAMPLES) -> list[Path]:
    """Write every sample notebook under ``folder`` (emptied first); returns the files."""
    shutil.rmtree(folder, ignore_errors=True)

    def write(student: str, lesson: str, nb: nbformat.NotebookNode) -> Path:
        path = folder / student / lesson / lessons.notebook_name(lesson)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        return path

    written = [lesson for lesson in lessons.written_lessons() if lessons.course_path(lesson).exists()]
    for lesson in written:
        write("ada", lesson, filled(lesson))
        write("ben", lesson, filled(lesson, MISTAKE_EDITS.get(lesson, [])))
        write("cho", lesson, nbformat.read(lessons.course_path(lesson), as_version=4))
    lesson, cell_id = DELETED_CELL
    nb = filled(lesson)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != cell_id]
    write("dev", lesson, nb)
    corrupt = write("eve", "03_attention", filled("03_attention"))
    corrupt.write_text(corrupt.read_text()[:2000])  # cut short, as by a failed upload
    if "01_embedding" in written:
        write("eve", "01_embedding", filled("01_embedding"))
    write("fay", "03_attention", filled("03_attention", warn=True))
    return sorted(folder.glob("*/*/*.ipynb"))


def main() -> int:
    print(f"wrote {len(write_samples())} sample notebooks into {SAMPLES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
