"""An entry a repaired copy cannot hold — a FIFO, a socket, a dangling or looping symbolic link, a link to a
directory, a directory where RocketMQ maps segments — is refused when the plan is made (exit 2 naming it),
never half-way through the apply (issue #26: before, `recover plan` said 0 and `recover apply` failed with
exit 1 on `shutil`'s SpecialFileError). Every kind, in every place of the store that the apply copies."""
from __future__ import annotations

import os
import socket

import pytest

from tests.cli.helpers import run
from tests.golden.goldens import BY_ID
from tests.store_files import copy_store, tree

GOLDEN = BY_ID["4.9.8/corrupt-body"]


def fifo(path):
    os.mkfifo(path)


def unix_socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


def dangling(path):
    os.symlink(path.parent / "nothing-here", path)


def looping(path):
    os.symlink(path, path)


def dir_link(path):
    os.symlink(path.parent.parent, path)


KINDS = {"fifo": (fifo, "a FIFO"), "socket": (unix_socket, "a socket"), "dangling": (dangling, "leads nowhere"),
         "looping": (looping, "leads nowhere"), "dir-link": (dir_link, "a symbolic link to a directory")}
# where: a segment's place, config files, the store root (consumequeue/ and index/ are rebuilt, not copied)
PLACES = {"segment": "commitlog/00000000000009999999", "consumer-offsets": "config/consumerOffset.json",
          "config": "config/extra.json", "root": "something"}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_plan_refuses_what_the_apply_could_not_copy(tmp_path, kind, place):
    store = copy_store(GOLDEN.store, tmp_path / "store")
    entry = store / PLACES[place]
    entry.parent.mkdir(exist_ok=True)
    if entry.exists() or entry.is_symlink():
        entry.unlink()
    make, why = KINDS[kind]
    make(entry)
    before = tree(store)
    result = run("recover", "plan", store, "--output", tmp_path / "plan")
    assert result.exit_code == 2, result.output
    assert f"{entry}: " in result.stderr and why in result.stderr and "plan again" in result.stderr
    assert tree(store) == before and not (tmp_path / "plan" / "plan.json").exists()


def test_a_directory_in_the_commitlog_is_refused_and_a_linked_file_is_copied(tmp_path):
    store = copy_store(GOLDEN.store, tmp_path / "store")
    (store / "commitlog" / "old").mkdir()
    result = run("recover", "plan", store, "--output", tmp_path / "plan")
    assert result.exit_code == 2 and "a directory inside commitlog/" in result.stderr
    (store / "commitlog" / "old").rmdir()
    # a link to a regular file is copied as the file: the plan and the apply go through
    outside = tmp_path / "consumerOffset.json"
    outside.write_bytes((BY_ID["4.9.8/consumer-offsets"].store / "config" / "consumerOffset.json").read_bytes())
    (store / "config").mkdir()
    os.symlink(outside, store / "config" / "consumerOffset.json")
    assert run("recover", "plan", store, "--output", tmp_path / "plan").exit_code == 3
    applied = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "repaired")
    assert applied.exit_code == 0, applied.output
    assert (tmp_path / "repaired" / "config" / "consumerOffset.json").read_bytes() == outside.read_bytes()
