"""What one grading kernel may use (``Limits``), and its one crossing into traitlets.

The instructor sets the limits on the command line or in Python; the kernel managers read them
as configurable traits (``c.SandboxSettings``, autograder/engine/kernels/sandbox.py), each made by
``limit_trait`` from its field. ``to_config`` and ``from_settings`` are the only way across, both
going over every field of ``Limits``, so a new field cannot be left behind by a hand copy.
"""

from dataclasses import dataclass, fields

from traitlets import Float, HasTraits, Integer, TraitType
from traitlets.config import Config

from autograder.engine.submission_files import Caps

SETTINGS_SECTION = "SandboxSettings"  # the configuration section of both kernel managers
TRAIT_TYPES: dict[type, type[TraitType]] = {float: Float, int: Integer}


@dataclass(frozen=True)
class Limits:
    """What one grading kernel may use. The defaults fit the lessons with room to spare:
    a lesson's kernel peaks near 0.5 GiB and uses well under a minute of CPU."""

    # private writable memory of each process (RLIMIT_DATA); the size of each of /tmp and
    # /dev/shm; and, where a memory group can be made, the sandbox's whole memory beyond what
    # its imports take (memory_cap)
    memory_gib: float = 4.0
    cpu_s: int = 600  # CPU seconds of each process (RLIMIT_CPU), all cells together
    open_files: int = 1024  # RLIMIT_NOFILE
    # processes and threads of the whole kernel (a cgroup's pids.max, where one can be made):
    # a kernel runs about 10 threads of its own plus one per core for PyTorch
    tasks: int = 512
    # what the grader keeps of the files a kernel leaves in its folder (submission_files.Caps)
    folder_mib: int = Caps.mib
    folder_files: int = Caps.files
    # the largest file a process may write (RLIMIT_FSIZE), in its folder, /tmp or anywhere
    file_mib: int = 1024
    # what it may write to its folders on the grader's disk while it runs, all files together
    # (autograder/engine/kernels/write_watch.py: past it, the kernel is ended)
    disk_mib: int = 1024

    def caps(self) -> Caps:
        """The caps on what the grader keeps of a kernel's folder."""
        return Caps(mib=self.folder_mib, files=self.folder_files)

    def to_config(self) -> Config:
        """These limits as the kernel managers' configuration: ``c.SandboxSettings.<field>``
        for every field."""
        config = Config()
        for field in fields(self):
            config[SETTINGS_SECTION][field.name] = getattr(self, field.name)
        return config

    @classmethod
    def from_settings(cls, settings: HasTraits) -> "Limits":
        """The limits a kernel manager was configured with: its trait of each field's name."""
        return cls(**{field.name: getattr(settings, field.name) for field in fields(cls)})


def limit_trait(name: str, help_text: str) -> TraitType:
    """The configurable trait of ``Limits``' field ``name``: of its type, with its default."""
    field = next(field for field in fields(Limits) if field.name == name)
    return TRAIT_TYPES[field.type](field.default, help=help_text).tag(config=True)
