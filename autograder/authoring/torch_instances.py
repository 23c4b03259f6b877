"""Write autograder/torch_instances.txt: the class templates of torch's headers whose members every
lesson-12 unit instantiates again, for the installed torch (clang only).

    python -m autograder.authoring.torch_instances     # after a change of torch's version

Each unit compiled after the precompiled ``torch/torch.h`` (autograder/cpp_pch.py) still spends
about half a second instantiating the virtual members of torch's class templates (such as
``torch::nn::Cloneable<torch::nn::LinearImpl>``), since clang defines a class's vtable at the end of
each unit, not in the header. An explicit instantiation declaration of each (``extern template
class ...;``) in the precompiled header stops that; the header's folder then holds their one
explicit instantiation (``cpp_pch.INSTANCES``), which a build links where it needs one.

This script finds them as clang reports them: it precompiles the header as lesson 12 does,
compiles an empty unit with ``-ftime-trace``, and keeps each torch or c10 class template whose
members the unit instantiated; it repeats with the list so far in the header until the unit finds
no more, then keeps those that instantiate explicitly without error.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import cpp_pch, libtorch

NAMESPACES = ("torch::", "c10::")
ROUNDS = 4


def class_of(member: str) -> str | None:
    """``A<B>::C<D>`` of a member name ``A<B>::C<D>::f`` (or ``::f<E>``) when it is a class template
    of torch's, else None."""
    depth, cut = 0, None
    for index, char in enumerate(member):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if depth == 0 and member.startswith("::", index):
            cut = index
    owner = member[:cut] if cut else ""
    return owner if owner.startswith(NAMESPACES) and owner.endswith(">") and "(" not in owner else None


def instantiated(work: Path, classes: list[str]) -> set[str]:
    """The class templates whose members an empty unit instantiates after a header that declares
    ``classes`` extern."""
    header = work / cpp_pch.HEADER
    header.write_text(cpp_pch.text(libtorch.UNIT_HEAD, classes))
    flags = [*cpp_pch.flags(), "-fpch-instantiate-templates"]
    compile_header = [cpp_pch.compiler(), "-x", "c++-header", *flags, "-", "-o", f"{header}.gch"]
    subprocess.run(compile_header, input=header.read_text(), text=True, check=True)
    (work / "empty.cpp").write_text("int course_empty;\n")
    unit = [cpp_pch.compiler(), *cpp_pch.flags(), "-include", str(header), "-ftime-trace", "-c"]
    subprocess.run([*unit, str(work / "empty.cpp"), "-o", str(work / "empty.o")], check=True)
    trace = json.loads((work / "empty.json").read_text())["traceEvents"]
    events = (event for event in trace if event.get("name") == "InstantiateFunction")
    names = (event.get("args", {}).get("detail", "") for event in events)
    return {owner for owner in map(class_of, names) if owner}


def compiles(work: Path, classes: list[str]) -> bool:
    """Whether the explicit instantiation of ``classes`` compiles."""
    return cpp_pch.compile_instances(work, classes, limit_s=600) is None


def main() -> int:
    if not cpp_pch.is_clang():
        print("clang++ is needed (its -ftime-trace names what a unit instantiates)")
        return 1
    with tempfile.TemporaryDirectory(prefix="torch-instances-") as scratch:
        work = Path(scratch)
        found: list[str] = []
        for _ in range(ROUNDS):
            new = sorted(instantiated(work, found) - set(found))
            print(f"{len(new)} more class templates")
            if not new:
                break
            found += new
        kept = [name for name in sorted(found) if compiles(work, [name])]
        if not compiles(work, kept):
            print("their explicit instantiations do not compile together")
            return 1
    lines = [f"# {cpp_pch.INSTANCES_VERSION_PREFIX}{cpp_pch.torch_release()}", *kept]
    cpp_pch.INSTANCES_LIST.write_text("\n".join(lines) + "\n")
    print(f"{len(kept)} of {len(found)} written to {cpp_pch.INSTANCES_LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
