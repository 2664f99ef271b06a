"""The ``dreampool`` command line.

The only place that catches :class:`DreampoolError`: it prints
``dreampool: error: …`` (one line per problem) and ``dreampool: hint: …``
to stderr and exits 1. Results go to stdout, progress and notes to stderr.
Every line to stderr passes :func:`~builder.errors.printable` (:func:`err`):
a file or key name can carry terminal escapes, and they never reach the
terminal raw.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from builder import __version__
from builder.content import anonymity, keystore, pool
from builder.errors import DreampoolError, InputError, PoolError, Problem, printable
from builder.formats import dream as dreamfmt
from builder.formats import statement
from builder.formats.b64 import b64url_encode
from builder.text import readerview, redact

PROG = "dreampool"

# What a finished build held (its log, model and cache: millions of objects at
# 100k dreams), kept here by the `dreampool` command (run) so that the process
# can end without freeing them; None when main() is called in-process.
_HELD: list[object] | None = None


def out(line: str = "") -> None:
    print(line, flush=True)


def err(line: str, *, flush: bool = False) -> None:
    """One line to stderr, every control, bidi or invisible character escaped."""
    print(printable(line), file=sys.stderr, flush=flush)


def note(line: str) -> None:
    err(f"{PROG}: {line}", flush=True)


def report_problems(problems: Sequence[Problem]) -> None:
    for p in problems:
        err(f"{PROG}: error: {p}")


# --- author keys and signing ---------------------------------------------------


def cmd_keygen(args: argparse.Namespace) -> int:
    problems = dreamfmt.validate_author(args.author, "--author")
    if problems:
        raise InputError(problems, hint="an author name is a public pseudonym of 1–64 characters")
    if pool.name_skeleton(args.author) == pool.name_skeleton(anonymity.NAME):
        # A pool refuses a dream signed under it by a lasting key; `sign` makes
        # the one-time key an anonymized dream needs (a new user's audit).
        raise InputError(
            [Problem("--author", "", f"{anonymity.NAME!r} is reserved for anonymized dreams")],
            hint="choose your own pseudonym; to publish a dream without it, sign the draft "
            "with `dreampool sign --anonymize`, which makes a one-time key",
        )
    key = keystore.create_author_key(args.author)
    note(
        f"private key written to {keystore.key_dir(create=False)}/{key.key_id[7:]}.key (mode 0600)"
    )
    out(f"author     {args.author}")
    out(f"keyId      {key.key_id}")
    out(f"publicKey  {b64url_encode(key.public_key)}")
    return 0


def read_dream(path: Path) -> bytes:
    """:func:`builder.content.pool.read_regular`; a file over the dream limit is refused
    with its real size (the read stops one byte past the limit)."""
    data = pool.read_regular(path)
    if len(data) > dreamfmt.MAX_BYTES:
        # read_regular refused a symlink, so this is the file just read.
        raise dreamfmt.too_big(str(path), os.stat(path, follow_symlinks=False).st_size)
    return data


# A draft may be larger than the dream it signs: its fields are checked first,
# so an overlong field is named (/title: …, is 102400) rather than the file's
# size (a new user's audit, 23rd session); what is signed keeps the limit.
DRAFT_MAX_BYTES = 16 * dreamfmt.MAX_BYTES


def cmd_sign(args: argparse.Namespace) -> int:
    file = str(args.draft)
    raw = pool.read_regular(args.draft, max_bytes=DRAFT_MAX_BYTES)
    draft = dreamfmt.load_json(raw, file, max_bytes=DRAFT_MAX_BYTES)
    if not isinstance(draft, dict):
        raise InputError([Problem(file, "", "must be a JSON object")])
    draft.pop("sig", None)
    if args.anonymize or anonymity.is_anonymized(draft):
        # docs/protocol.md §1.2: a one-time key under the reserved name, never stored.
        if args.key:
            note(f"--key {args.key} is not used: an anonymized dream is signed with a one-time key")
        if draft.get("author", anonymity.NAME) != anonymity.NAME:
            note(f"/author is replaced by {anonymity.NAME!r}")
        draft = anonymity.anonymous_draft(draft)
        seed, anonymous = anonymity.one_time_seed(), True
    elif args.key:
        key = keystore.load_author_key(args.key)
        draft.setdefault("author", key.author)
        if draft["author"] != key.author:
            raise InputError(
                [
                    Problem(
                        file, "/author", f"is not the author of key {key.key_id} ({key.author!r})"
                    )
                ],
                hint="sign with the key made for this author, or change /author",
            )
        seed, anonymous = key.seed, False
    else:
        raise InputError(
            [Problem("--key", "", "is required to sign under your name")],
            hint="pass --key KEYID (from `dreampool keygen`), or --anonymize to sign "
            "anonymously with a one-time key",
        )
    problems = dreamfmt.validate(draft, file, require_sig=False)
    if problems:
        raise InputError(problems, hint="fix the draft and sign again")
    redacted, changes = redact.redact_dream(draft)
    note("redaction replaces " + "; ".join(redact.CAUGHT.values()))
    note(redact.FORMS)
    note(f"it does not catch {redact.NOT_CAUGHT}: read what you sign")
    for change in changes:
        note(f"redacted {change.pointer}: {change.kind} → [{change.kind}]")
    problems = dreamfmt.validate(redacted, file, require_sig=False)
    if problems:
        raise InputError(problems, hint="after redaction the draft breaks these rules; shorten it")
    # What only the rendering shows cannot be replaced: refused, nothing written.
    problems = readerview.problems(redacted, file)
    if problems:
        raise InputError(problems, hint=readerview.HINT_SIGN)
    signed = dreamfmt.sign(redacted, seed)
    del seed  # the one-time key is not kept (it never left this process)
    data = (json.dumps(signed, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    if len(data) > dreamfmt.MAX_BYTES:
        raise InputError(
            [
                Problem(
                    file,
                    "",
                    f"the signed dream would be {len(data)} bytes, the limit is "
                    f"{dreamfmt.MAX_BYTES}",
                )
            ],
            hint="shorten its longest texts (summary, entries) and sign again",
        )
    d = dreamfmt.parse(data, file)
    if args.output:
        pool.atomic_write(Path(args.output), data)
        note(f"signed dream {d.id} written to {args.output}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        note(f"signed dream {d.id}")
    if anonymous:
        note(anonymity.COST)
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    old = keystore.load_author_key(args.old)
    new = keystore.load_author_key(args.new)
    if old.key_id == new.key_id:
        raise InputError(
            [Problem("--new", "", f"is the old key {old.key_id} itself")],
            hint="make the new key first with `dreampool keygen --author` and the same name",
        )
    if old.author != new.author:
        raise InputError(
            [Problem("--new", "", f"key {new.key_id} is for {new.author!r}, not {old.author!r}")],
            hint="make the new key with `dreampool keygen --author` and the same name",
        )
    signed = statement.sign(
        {
            "type": statement.ROTATE,
            "author": old.author,
            "oldKeyId": old.key_id,
            "newKeyId": new.key_id,
            "newPublicKey": b64url_encode(new.public_key),
        },
        old.seed,
    )
    data = (json.dumps(signed, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    pool.atomic_write(Path(args.output), data)
    note(
        f"rotation {old.key_id} → {new.key_id} written to {args.output}; "
        "submit it together with a dream signed by the new key; from then on the pool "
        "refuses anything the old key signs (it is retired)"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            d = pool.check_dream(read_dream(path), str(path))
        except DreampoolError as exc:
            failed += 1
            _print_error(exc)
            continue
        except OSError as exc:
            failed += 1
            err(f"{PROG}: error: {path}: cannot read: {exc.strerror or exc}")
            continue
        out(f"ok {path}: dream {d.id} by {d.author} ({d.key_id})")
    return 1 if failed else 0


# --- the pool ------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    result = pool.submit(Path(args.content), [Path(f) for f in args.files])
    for key_id in result.new_keys:
        out(f"registered new key {key_id} as guest")
    for dream_id in result.added:
        out(f"added {dream_id} → {Path(args.content) / 'dreams' / (dream_id + '.json')}")
    for dream_id in result.already:
        out(f"already in the pool as {dream_id}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from builder.cli import summary
    from builder.content import gate
    from builder.log import logbuild

    content = Path(args.content)
    warnings: list[Problem] = []
    if args.base is not None:
        # A pull request: only what it changes (builder.content.gate).
        notes: list[Problem] = []
        problems, scanned = gate.check_pull_request(content, args.base, notes)
        # Not this pull request's to fix (builder.content.gate._blame): said, not failed.
        warnings += [
            dataclasses.replace(
                p,
                rule=p.rule + " (on the base branch already, not caused by this pull request: "
                "a maintainer fixes it there)",
            )
            for p in notes
        ]
    else:
        problems, scanned = pool.check(content)
        named = {p.file for p in problems}
        problems += [p for p in gate.special_files(content) if p.file not in named]
        # A tracked symlink under content/ is also a file the scan named
        # (each names it as the user gave --content, or from the current folder).
        named = {os.path.abspath(p.file) for p in problems}
        problems += [
            p for p in gate.tracked_problems(content) if os.path.abspath(p.file) not in named
        ]
        try:
            logbuild.verify_state(content, scanned)
            problems.extend(logbuild.unlogged_problems(content, scanned))
            refused, warnings = logbuild.anonymity_review(content, scanned)
            problems.extend(refused)
        except DreampoolError as exc:
            rule = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
            problems.append(Problem(str(content / "log"), "", rule))
    if args.format == "github":
        for p in problems:
            out(summary.annotation(p))
        for p in warnings:
            out(summary.annotation(p, level="warning"))
    else:
        report_problems(problems)
        for p in warnings:
            err(f"{PROG}: warning: {p}")
    if args.summary:
        summary.write_summary(args.summary, problems, args.content)
    if problems:
        err(f"{PROG}: {len(problems)} problem(s) in {args.content}")
        return 1
    out(f"ok: {args.content} has no problems")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """Scaffold; print each file written, what requirements.txt names and why, then
    the next steps."""
    from builder.content import init

    written = init.init_pool(
        args.dir,
        args.origin,
        args.title,
        owners=args.owner,
        requirement=args.requirement,
        host=args.host,
    )
    chosen = init.chosen_requirement(args.requirement, args.host)
    for path in written:
        print(f"wrote {path}", flush=True)
    note(f"requirements.txt installs {chosen.line}: {chosen.why}")
    if not args.owner:
        note(
            "note: CODEOWNERS has its rules commented out: name the maintainers "
            "with --owner, or edit .github/CODEOWNERS",
        )
    for n, step in enumerate(init.next_steps(args.dir, args.origin, args.host), 1):
        print(f"dreampool: next {n}. {step}", file=sys.stderr)
    return 0


# --- the log and the site ---------------------------------------------------


def pages_warning(site_bytes: int, fit: str) -> str:
    """The build summary's line when the site is over (or near) the 1 GB GitHub
    Pages publishes (builder.site.hosting): on stdout, so a workflow's job
    summary shows it too."""
    from builder.site import hosting

    size = f"{site_bytes / 1e9:.2f} GB"
    limit = f"{hosting.PAGES_LIMIT / 1e9:g} GB"
    where = (
        f"over the {limit} GitHub Pages publishes"
        if fit == "over"
        else f"{site_bytes / hosting.PAGES_LIMIT:.0%} of the {limit} GitHub Pages publishes"
    )
    return (
        f'warning: the site is {size}, {where} (GitHub Docs, "GitHub Pages limits"). '
        "If this pool publishes to GitHub Pages, move it to object storage: "
        "`dreampool deploy s3://BUCKET/PREFIX`, and `dreampool init --host s3` for its "
        'workflow (docs/operators.md, "Object storage and a CDN").'
    )


def cmd_build(args: argparse.Namespace) -> int:
    from builder import build
    from builder.cli.progress import Progress, progress_enabled

    signer = build.load_log_key(args.log_key)
    drawn = progress_enabled(args.quiet)
    report = build.build(
        Path(args.content),
        Path(args.out),
        signer=signer,
        base_url=args.base_url,
        # No bar to draw (quiet, not a terminal, CI): no meter, and nothing counted for one.
        progress=(lambda total, label: Progress(total, label, enabled=True)) if drawn else None,
        retain=_HELD,
    )
    for line in report.notes:
        note(line)
    for problem in report.refused:
        err(f"{PROG}: refused: {problem}")
    for problem in report.set_aside:
        err(f"{PROG}: refused (set aside, not failing the build): {problem}")
    signed = "signed a new checkpoint" if report.signed else "checkpoint unchanged"
    aside = f" ({len(report.set_aside)} set aside: remove them)" if report.set_aside else ""
    out(
        f"built {args.out}: {len(report.admitted)} admitted, "
        f"{len(report.refused) + len(report.set_aside)} refused{aside}, "
        f"{len(report.erased)} erased; log size {report.size} ({signed}); "
        f"{report.files} files in {report.seconds:.2f}s"
    )
    if report.pages_fit != "ok":
        out(pages_warning(report.site_bytes, report.pages_fit))
    if not args.quiet:
        serve = "dreampool serve" + ("" if args.out == "site" else f" --out {args.out}")
        note(f"preview it with `{serve}` and open http://127.0.0.1:8000/")
    return 1 if report.refused else 0


def cmd_log_keygen(args: argparse.Namespace) -> int:
    from builder.formats import note as notefmt

    problems = pool.origin_problems(args.origin, "--origin", "")
    if problems:
        raise InputError(problems, hint=pool.ORIGIN_HINT)
    skey, vkey = notefmt.generate_key(args.origin)
    name = "".join(c if c.isalnum() or c in "-." else "_" for c in args.origin)
    path = keystore.key_dir(create=True) / f"log-{name}.key"
    keystore.write_private(path, (skey + "\n").encode())
    note_line = f"private log key written to {path} (mode 0600); "
    note(note_line + f'build with --log-key {path} or DREAMPOOL_LOG_KEY="$(cat {path})"')
    out(vkey)
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    from builder.log import erase

    record = erase.erase(Path(args.content), args.id, args.reason, args.request)
    out(f"erased {args.id}: dream and salt deleted, reason recorded in {record}")
    out(
        "the next `dreampool build` logs the erasure; to purge it from git history too, "
        "see docs/operators.md"
    )
    return 0


def cmd_recheck(args: argparse.Namespace) -> int:
    """Exit 0: no logged dream is refused by today's rules; 1: candidates for
    erasure, listed on stdout; 2: the pool is bad input (said on stderr)."""
    from builder.log import recheck

    try:
        report = recheck.recheck(Path(args.content))
    except DreampoolError as exc:
        _print_error(exc)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        err(f"{PROG}: error: {where}{exc.strerror or exc}")
        return 2
    for candidate in report.candidates:
        for finding in candidate.findings:
            out(f"candidate {candidate.dream_id} (leaf {candidate.index}): {finding}")
    if not report.candidates:
        checked = f"{report.checked} logged dream(s) in {args.content}"
        out(f"ok: today's rules refuse none of the {checked}")
        return 0
    ids = " ".join(c.dream_id for c in report.candidates)
    err(
        f"{PROG}: {len(report.candidates)} of {report.checked} logged dream(s) would be refused "
        f"today: {printable(ids)}. They stay published until erased: for each, "
        "`dreampool erase ID --reason legal|abuse|author-request`, commit, and build "
        f"(see {recheck.ERASE_DOC})"
    )
    return 1


def cmd_verify_proof(args: argparse.Namespace) -> int:
    """Print each step as it ends; 0 only if all hold, 1 at a failed step (its hint
    printed). A file that cannot be read is an InputError for :func:`main`."""
    from builder.errors import VerificationError
    from builder.readers import lightclient

    f = lightclient.read_proof_files(
        args.proof, args.record, args.policy, args.newer, args.consistency
    )

    def show(step: lightclient.Step) -> None:
        outcome = "ok" if step.ok else "FAILED"
        print(f"step {step.number} {outcome}: {step.detail}")

    try:
        result = lightclient.verify_proof(
            f.proof, f.record, f.policy, newer=f.newer, consistency=f.consistency, on_step=show
        )
    except VerificationError as exc:
        if exc.hint:
            print(f"hint: {exc.hint}")
        return 1
    if result.newer is None:
        print("step 5 skipped: no newer checkpoint given (--newer CHECKPOINT --consistency FILE)")
    print(f"verified: dream {result.id} is entry {result.index} of {result.checkpoint.origin}")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from builder.deploy import local, push, s3

    site = local.load(Path(args.out))
    store = s3.S3Store(args.target, endpoint_url=args.endpoint_url, region=args.region)
    report = push.deploy(site, store, dry_run=args.dry_run, verify=args.verify)
    if report.manifest_note:
        note(f"{report.manifest_note}; uploading every object")
    plan = report.plan
    for rel in report.missing:
        note(f"verify: {rel} is in the manifest but not in the bucket as uploaded: upload again")
    for rel in report.unknown:
        note(f"verify: {rel} is in the bucket but neither the site nor the manifest names it")
    target = store.url
    if args.dry_run:
        for phase, paths in ((1, plan.first), (2, plan.second)):
            for rel in paths:
                out(f"upload {phase} {plan.sizes[rel]} {rel}")
        for rel in plan.delete:
            out(f"delete 4 {plan.sizes[rel]} {rel}")
        for rel in plan.kept:
            out(f"keep {rel}")
        out(
            f"dry run, nothing changed: would upload {len(plan.uploads)} objects "
            f"({plan.upload_bytes()} bytes) and delete {len(plan.delete)} "
            f"({plan.delete_bytes()} bytes) in {target}/"
        )
    else:
        kept = f", kept {len(plan.kept)} the log needs" if plan.kept else ""
        out(
            f"deployed {args.out} to {target}/: uploaded {report.uploaded} objects "
            f"({report.uploaded_bytes} bytes), deleted {report.deleted}{kept}; "
            f"manifest written {report.manifest_writes} times ({report.manifest_bytes} bytes)"
        )
    if report.purge:
        verb = "will be deleted" if args.dry_run else "deleted"
        note(
            f"{len(report.purge)} objects {verb} were served as immutable: "
            'purge them from your CDN (docs/operators.md, "Object storage and a CDN"):'
        )
        for rel in report.purge:
            out(f"purge {rel}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from builder.site import serve

    site = Path(args.out)
    if not (site / "index.html").is_file():
        raise DreampoolError(
            f"{site} holds no built site", hint="run `dreampool build` first, or pass --out DIR"
        )
    server = serve.make_server(site, args.port, "127.0.0.1")
    note(f"serving {site} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    finally:
        server.server_close()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until stdin closes."""
    from builder.agents import mcp_server

    mcp_server.require_sdk()  # before reading the pool: say at once what is missing
    if args.out is not None and args.content is None:
        raise PoolError("--out names a checkout's built site: give it with --content")
    out = args.out
    if out is None and args.content is not None:
        out = args.content.absolute().parent / "site"  # where `dreampool build` puts it
    mcp_server.run(args.site, args.content, args.policy, out)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from builder.agents import memos

    draft, notes = memos.read_diary(args.diary, author=args.author, entry=args.entry)
    for line in notes:
        print(f"dreampool: note: {line}", file=sys.stderr)
    out = (json.dumps(draft, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    if args.output:
        pool.atomic_write(Path(args.output), out)
        print(
            f"dreampool: draft written to {args.output}; sign it with `dreampool sign`",
            file=sys.stderr,
        )
    else:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    from builder.readers import monitor

    try:
        report = monitor.run_monitor(
            args.policy,
            args.state,
            args.site,
            sample=None if args.all else args.sample,
            deadline=args.deadline,
        )
    except monitor.CouldNotCheck as exc:
        # Not a verdict: the site gave nothing to decide on (docs/verifiers.md).
        err(f"{PROG}: error: could not check: {exc.message}")
        if exc.hint:
            err(f"{PROG}: hint: {exc.hint}")
        return monitor.EXIT_UNCHECKED
    for line in report.lines:
        out(printable(line))  # the lines carry the site's URLs and signed notes
    return report.code


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError("give between 0 and 86400 seconds")
    return value


def _count(text: str) -> int:
    """A whole number ≥ 0 on the command line (argparse reports the error)."""
    if not text.isdigit() or len(text) > 9:
        raise argparse.ArgumentTypeError(f"want a whole number 0 or more, not {printable(text)}")
    return int(text)


# --- plumbing ------------------------------------------------------------------


def _print_error(exc: DreampoolError) -> None:
    if isinstance(exc, InputError):
        report_problems(exc.problems)
    else:
        err(f"{PROG}: error: {exc.message}")
    if exc.hint:
        err(f"{PROG}: hint: {exc.hint}")


CONTENT_HELP = "the pool's content folder (default: content)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A public, verifiable pool of signed agent dreams.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of these; `dreampool COMMAND --help` lists its options",
    )

    def add(
        name: str, func: Callable[[argparse.Namespace], int], help: str, epilog: str | None = None
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=epilog)
        p.set_defaults(func=func, command_parser=p)
        return p

    p = add("keygen", cmd_keygen, "make an Ed25519 author key in your key store")
    p.add_argument("--author", required=True, help="your public pseudonym (1–64 characters)")

    p = add("sign", cmd_sign, "redact a draft dream and sign it")
    p.add_argument("draft", type=Path, metavar="DRAFT.json", help="the unsigned draft dream")
    p.add_argument(
        "--key",
        metavar="KEYID",
        help="keyId (sha256:…) or key file; not used for an anonymized dream",
    )
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="set consent.anonymize and sign with a one-time key under the author name "
        "'anonymous' (as a draft with consent.anonymize true is): the dream counts as a "
        "guest's and can never be linked to you, nor erased by your signed request",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")

    p = add("rotate", cmd_rotate, "sign a statement moving your author name to a new key")
    p.add_argument("--old", required=True, metavar="KEYID", help="the key that holds the name now")
    p.add_argument("--new", required=True, metavar="KEYID", help="the key to move to")
    p.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="write the signed statement here"
    )

    p = add("verify", cmd_verify, "check the format and signature of signed dreams")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a signed dream file")

    p = add("submit", cmd_submit, "add signed dreams (and rotation statements) to a pool")
    p.add_argument(
        "files", nargs="+", metavar="SIGNED.json", help="a signed dream or rotation statement"
    )
    p.add_argument("--content", default="content", metavar="DIR", help=CONTENT_HELP)

    p = add("check", cmd_check, "validate the whole pool, or a pull request, without writing")
    p.add_argument("--content", default="content", metavar="DIR", help=CONTENT_HELP)
    p.add_argument(
        "--base",
        metavar="REF",
        help="check a pull request: refuse every change since commit REF outside the "
        "contributor paths, and check only what it adds (in a workflow: --base HEAD^1)",
    )
    p.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="text: one line per problem (default); github: workflow annotations",
    )
    p.add_argument(
        "--summary",
        type=Path,
        metavar="FILE",
        help="append a Markdown table of the problems to FILE (e.g. $GITHUB_STEP_SUMMARY)",
    )

    p = add("init", cmd_init, "start a pool repository: settings, folders, workflows")
    p.add_argument("dir", type=Path, metavar="DIR", help="the new pool's folder (made if missing)")
    p.add_argument("--origin", required=True, help="the log's origin, e.g. example.org/dreams")
    p.add_argument("--title", required=True, help="the pool's title")
    p.add_argument(
        "--owner",
        action="append",
        default=[],
        metavar="@HANDLE",
        help="a maintainer (@user or @org/team) for .github/CODEOWNERS; repeatable",
    )
    p.add_argument(
        "--requirement",
        metavar="SPEC",
        help="what requirements.txt names for the workflows to pip install (default: "
        "this dreampool, as it was installed: a release, or a git commit)",
    )
    p.add_argument(
        "--host",
        choices=("pages", "s3"),
        default="pages",
        help="where the publish workflow deploys the site: pages (GitHub Pages, default) "
        "or s3 (an S3-compatible bucket with `dreampool deploy`: AWS by OIDC, R2, B2, MinIO)",
    )

    p = add("build", cmd_build, "admit new dreams into the log and build the site")
    p.add_argument("--content", default="content", metavar="DIR", help=CONTENT_HELP)
    p.add_argument(
        "--out", default="site", metavar="DIR", help="where the site goes (default: site)"
    )
    p.add_argument("--base-url", metavar="URL", help="default: base_url in pool.yaml")
    p.add_argument(
        "--log-key",
        type=Path,
        metavar="FILE",
        help="the log's private key (default: $DREAMPOOL_LOG_KEY)",
    )
    p.add_argument("--quiet", action="store_true", help="print only errors and the summary")

    p = add("log-keygen", cmd_log_keygen, "make the pool's log signing key (a C2SP note key)")
    p.add_argument("--origin", required=True, help="the pool's origin, e.g. example.org/dreams")

    p = add("erase", cmd_erase, "erase a dream: delete its text and salt, log an erasure")
    p.add_argument("id", metavar="ID", help="the dream's id (16 hex)")
    p.add_argument(
        "--reason",
        required=True,
        choices=("author-request", "legal", "abuse"),
        help="why it is erased; logged with the erasure",
    )
    p.add_argument(
        "--request",
        type=Path,
        metavar="SIGNED.json",
        help="the author's signed dreampool.erase/v1 request",
    )
    p.add_argument("--content", default="content", metavar="DIR", help=CONTENT_HELP)

    p = add(
        "recheck",
        cmd_recheck,
        "review every logged dream again by today's admission rules (read-only)",
        epilog="A build takes a logged dream by its commitment, so rules added since its "
        "admission (new redaction kinds, a new Unicode policy) are not applied to it; this "
        "applies them: signature, key rules, redaction of the text and of what a reader "
        "sees. exit status: 0 none refused; 1 candidates for erasure, listed on stdout "
        "(file, pointer, kind; never the text found), each to erase with `dreampool erase`; "
        "2 the pool is bad input (a logged file missing, changed or without its salt, a "
        "broken key directory or log).",
    )
    p.add_argument("--content", default="content", metavar="DIR", help=CONTENT_HELP)

    p = add(
        "verify-proof", cmd_verify_proof, "verify a dream's proof offline (docs/protocol.md §5)"
    )
    p.add_argument("proof", type=Path, metavar="PROOF", help="the dream's proof.tlog-proof")
    p.add_argument(
        "--record", required=True, type=Path, metavar="RECORD.json", help="the dream's record.json"
    )
    p.add_argument(
        "--policy", required=True, type=Path, metavar="POLICY", help="your pinned log policy"
    )
    p.add_argument(
        "--newer",
        type=Path,
        metavar="CHECKPOINT",
        help="a newer checkpoint to prove consistency with (step 5)",
    )
    p.add_argument(
        "--consistency",
        type=Path,
        metavar="FILE",
        help="the consistency proof to --newer (log/consistency/<m>)",
    )

    p = add(
        "deploy",
        cmd_deploy,
        "upload the built site to S3-compatible object storage, only what changed",
        epilog="Credentials come from the environment or config files only "
        "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity role). "
        "Order: new objects, then log/checkpoint and the pages naming it, then the "
        "manifest PREFIX/.dreampool-deploy.json.gz, then deletions; a deploy that stopped "
        'half-way completes when run again (docs/operators.md, "Object storage and a CDN"). '
        "Needs boto3: pip install 'dreampool[s3]'.",
    )
    p.add_argument("target", metavar="s3://BUCKET[/PREFIX]", help="where the site goes")
    p.add_argument("--out", default="site", metavar="DIR", help="the built site (default: site)")
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="an S3-compatible service's endpoint (R2, MinIO, B2); default: AWS",
    )
    p.add_argument("--region", metavar="R", help="the bucket's region (default: boto3's)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the objects and bytes to upload and delete, change nothing",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="list the prefix: upload again what the manifest lists but the bucket lacks "
        "(or holds other bytes of), and report objects nobody listed",
    )

    p = add("serve", cmd_serve, "preview the built site on 127.0.0.1")
    p.add_argument("--out", default="site", metavar="DIR", help="the built site (default: site)")
    p.add_argument("--port", type=int, default=8000, help="the port (default: 8000)")

    p = add("mcp", cmd_mcp, "serve the pool to agents as MCP tools over stdio")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--site", metavar="DIR_OR_URL", help="a built site: its directory or http(s) URL"
    )
    source.add_argument(
        "--content", type=Path, metavar="DIR", help="a pool checkout's content/ directory"
    )
    p.add_argument(
        "--policy",
        type=Path,
        metavar="POLICY",
        help="pin this log policy (default: the source's log/policy, trusted on first use)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="with --content: the built site whose build store is read, never written, "
        "so dreams need not be checked again (default: site beside DIR's folder)",
    )

    p = add("import", cmd_import, "turn another system's dream into a draft dream")
    kinds = p.add_subparsers(
        dest="kind", required=True, metavar="KIND", help="the system the dream comes from"
    )
    q = kinds.add_parser(
        "memos",
        help="a MemOS Dream diary entry",
        description="a MemOS Dream diary entry as a draft",
    )
    q.set_defaults(command_parser=q)
    q.add_argument("diary", type=Path, metavar="DIARY.json", help="the exported diary file")
    q.add_argument(
        "--author", help="your public pseudonym (default: `dreampool sign` takes the key's)"
    )
    q.add_argument("--entry", metavar="ID", help="the diary_id or task_id to import from a list")
    q.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")

    p = add(
        "monitor",
        cmd_monitor,
        "check a pool's new checkpoint against the last one seen, and its dreams' records",
        epilog="A dream is present when its record.json is fetched (GET) and recomputes "
        "its logged leaf. exit status: 0 history unchanged and every dream checked present "
        "(the state is stored); 2 a verdict, printed with its evidence: a fork (two signed "
        "checkpoints that a proof shows inconsistent) or a logged dream, not erased, missing "
        "(no record) or altered (the record served is not the logged dream); 3 could not "
        "check (a file missing, garbled, unverifiable, stale or slow, the --deadline passed, "
        "or another run holds the state: run again later); 1 a local problem (policy, state "
        "file, arguments, a SITE URL no request can carry). The state file is written only "
        "on 0; FILE.seen keeps the newest checkpoint verified on any run that reached "
        "presence, so a fork is found even if that run ended in 3; FILE.lock is locked for "
        "the run.",
    )
    p.add_argument("site", metavar="SITE", help="a site directory or http(s) URL")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--sample",
        type=_count,
        default=4,
        metavar="N",
        help="besides the dreams logged since the state, check the records of N entry "
        "bundles (up to 256 dreams each) drawn at random from the older ones (default 4)",
    )
    group.add_argument("--all", action="store_true", help="check the record of every logged dream")
    p.add_argument(
        "--policy", required=True, type=Path, metavar="POLICY", help="your pinned log policy"
    )
    p.add_argument(
        "--state",
        required=True,
        type=Path,
        metavar="FILE",
        help="the last checkpoint fully checked, kept between runs (made on the first); "
        "FILE.seen and FILE.lock are kept beside it",
    )
    p.add_argument(
        "--deadline",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="seconds the whole run may take, fetches included; then it ends with exit 3 "
        "(default 600)",
    )
    return parser


def run() -> NoReturn:
    """The ``dreampool`` command (and ``python -m builder``): :func:`main`,
    then exit. After a build the process ends with ``os._exit``, once its
    output is flushed: every worker has been joined by then and the files
    are closed, and freeing the build's objects one by one, which nobody
    would see, took 0.1 s of a 1.5 s incremental build at 10k dreams and
    0.75 s at 100k."""
    global _HELD
    _HELD = []
    code = main()
    if _HELD:
        # A closed pipe (`dreampool build | head`) must not turn this into a
        # traceback; the code stays the build's.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, parsed. An argument nobody knows is the chosen command's
    error, shown with that command's usage: argparse leaves it to the top-level
    parser, whose usage names no option of any command."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(words)
    if unknown:
        # Before the command only the top-level options are read; what is left
        # there is the top-level parser's to report.
        before = words[: words.index(args.command)]
        mine = any(word in before for word in unknown)
        command: argparse.ArgumentParser = parser if mine else args.command_parser
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return int(args.func(args))
    except DreampoolError as exc:
        _print_error(exc)
        return 1
    except OSError as exc:
        # A file named on the command line that cannot be opened, or a full
        # disk while building (the live site and the log state are left as
        # they were: builder.site.writer, builder.log.logstate): say which file.
        where = f"{exc.filename}: " if exc.filename else ""
        err(f"{PROG}: error: {where}{exc.strerror or exc}")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            err(f"{PROG}: hint: free some space and run the command again")
        return 1
    except KeyboardInterrupt:
        err(f"{PROG}: interrupted")
        return 130
