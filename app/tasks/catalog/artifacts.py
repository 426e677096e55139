"""write_file_artifact: write a small file, only directly inside ARTIFACT_DIR.

The filename is checked twice: when the job is saved (extra_validation, so operators get the error
at once) and again when the task runs (a config may predate a rule, or bypass the form). At run time
the name is resolved against the real artifact directory and opened relative to a directory file
descriptor with O_NOFOLLOW, so a symlink planted in the directory cannot redirect the write.
"""

from __future__ import annotations

import errno
import os
import stat
import unicodedata

from app.tasks.registry import TaskContext, task

MAX_CONTENT_LENGTH = 1_000_000
MAX_FILENAME_BYTES = 255  # NAME_MAX on Linux and most filesystems
# Control, format (e.g. bidi overrides that disguise a name), surrogate, line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def check_artifact_filename(filename: str) -> None:
    """Raise ValueError unless `filename` is a plain file name that stays inside the artifact dir.

    Refused: empty, '.', '..', any '/' or '\\', absolute paths, control/format characters (NUL
    included), leading or trailing whitespace, more than 255 bytes of UTF-8, and a leading '-'
    (harmless to Cronwell, which never passes names to a command, but a trap for operators who
    handle artifacts with `rm`/`ls`).
    """
    if not isinstance(filename, str) or filename == "":
        raise ValueError("key 'filename': must be a non-empty file name")
    if filename in (".", ".."):
        raise ValueError(f"key 'filename': {filename!r} is not a file name")
    if "/" in filename or "\\" in filename or os.path.isabs(filename):
        raise ValueError("key 'filename': must be a bare file name without '/' or '\\' (no directories)")
    for char in filename:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ValueError(f"key 'filename': must not contain control character {char!r}")
    if filename != filename.strip():
        raise ValueError("key 'filename': must not start or end with whitespace")
    if filename.startswith("-"):
        raise ValueError("key 'filename': must not start with '-'")
    if len(filename.encode("utf-8")) > MAX_FILENAME_BYTES:
        raise ValueError(f"key 'filename': must be at most {MAX_FILENAME_BYTES} bytes in UTF-8")


def _check_config(config: dict) -> None:
    check_artifact_filename(config["filename"])


@task(
    "write_file_artifact",
    description=(
        "Write `content` (string, at most 1,000,000 characters, stored as UTF-8) to the file "
        "`filename` directly inside ARTIFACT_DIR. `filename` must be a bare name: no directories, "
        "'..', control characters or leading '-', at most 255 bytes. An existing file is kept and "
        "the task fails unless `overwrite` is true (default false). Symlinks are never followed."
    ),
    schema={
        "type": "object",
        "properties": {
            "filename": {"type": "string", "minLength": 1},
            "content": {"type": "string", "maxLength": MAX_CONTENT_LENGTH},
            "overwrite": {"type": "boolean", "default": False},
        },
        "required": ["filename", "content"],
        "additionalProperties": False,
    },
)
def write_file_artifact(config: dict, ctx: TaskContext) -> None:
    """Write the content to ARTIFACT_DIR/filename, refusing anything that could land elsewhere."""
    filename = config["filename"]
    check_artifact_filename(filename)
    overwrite = config.get("overwrite", False)
    data = config["content"].encode("utf-8")

    os.makedirs(ctx.artifact_dir, exist_ok=True)
    real_dir = os.path.realpath(ctx.artifact_dir)
    target = os.path.realpath(os.path.join(real_dir, filename))
    if os.path.dirname(target) != real_dir:
        raise PermissionError(f"refusing to write {filename!r}: it resolves outside the artifact directory")

    # O_NONBLOCK: a planted FIFO fails with ENXIO instead of hanging the task until its timeout.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if not overwrite:
        flags |= os.O_EXCL
    dir_fd = os.open(real_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(filename, flags, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            raise FileExistsError(
                f"artifact {filename!r} already exists; set overwrite to true to replace it"
            ) from None
        except OSError as exc:
            reason = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise PermissionError(f"refusing to write {filename!r}: {reason}") from exc
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "wb") as file:
        info = os.fstat(file.fileno())
        # A hard link would let "overwrite" modify a file that also lives outside the directory.
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise PermissionError(f"refusing to write {filename!r}: not a plain, singly linked file")
        file.truncate(0)
        file.write(data)
    print(f"wrote {len(data)} bytes to {os.path.join(real_dir, filename)}")


write_file_artifact.extra_validation = _check_config
