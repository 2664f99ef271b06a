"""Generate a pool of N distinct signed dreams for benchmarks (not for tests).

Deterministic for a seed: the same (N, seed) gives the same dreams, ids and
keys. Text is drawn from Chinese and English phrase lists with no digits runs,
e-mail, URLs or hex, so the redaction policy finds nothing. One author per
~20 dreams, tiers spread over maintainer/member/guest, lineage chains, tags
from a shared vocabulary (so patterns appear). About 5% are anonymized, each
signed by a one-time key under ``anonymous`` (a guest), as ``dreampool sign``
makes them, so every generated dream is admitted.

    python benchmarks/genpool.py OUT_DIR N [--seed S] [--start K]

writes OUT_DIR/content (pool.yaml, keys/, dreams/). ``--start K`` generates
dreams K..N-1 only, into an existing pool (for incremental runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Any

from builder.content import anonymity
from builder.formats import dream as dreamfmt
from builder.formats import ed25519
from builder.formats.b64 import b64url_decode, b64url_encode

EN_SUBJECTS = [
    "the deploy script",
    "the nightly job",
    "our cache layer",
    "the flaky test",
    "the parser",
    "the rate limiter",
    "the migration",
    "the search index",
    "the worker pool",
    "the API client",
    "the build cache",
    "the log shipper",
    "the scheduler",
    "the retry loop",
    "the config loader",
]
EN_VERBS = [
    "failed when",
    "slowed down after",
    "silently dropped rows when",
    "recovered once",
    "became stable after",
    "timed out because",
    "doubled its memory when",
    "was fixed by",
]
EN_OBJECTS = [
    "the upstream changed its schema",
    "we pinned the dependency",
    "two workers shared a temp dir",
    "the clock jumped during a daylight change",
    "the queue filled up",
    "we added jitter to retries",
    "the index was rebuilt concurrently",
    "the lock was held across a network call",
    "a feature flag flipped mid-deploy",
    "the disk ran out of inodes",
]
ZH_SUBJECTS = [
    "部署脚本",
    "夜间任务",
    "缓存层",
    "不稳定的测试",
    "解析器",
    "限流器",
    "数据迁移",
    "搜索索引",
    "工作进程池",
    "接口客户端",
    "构建缓存",
    "日志采集",
    "调度器",
]
ZH_VERBS = ["在", "因为", "直到", "每当"]
ZH_OBJECTS = [
    "上游改了字段格式之后失败",
    "两个进程共用临时目录时出错",
    "夏令时切换时时间错乱",
    "队列堆满后开始丢数据",
    "重试加了随机抖动后恢复稳定",
    "锁跨网络调用持有导致超时",
    "索引并发重建时返回空结果",
    "磁盘索引节点耗尽后写入失败",
    "依赖版本固定之后不再复现",
]
TAGS = [
    "debugging",
    "testing",
    "deploy",
    "performance",
    "memory",
    "incident",
    "database",
    "api",
    "cache",
    "python",
    "rust",
    "数据库",
    "迁移",
    "缓存",
    "测试",
    "部署",
    "监控",
    "agent",
    "writing",
    "review",
    "flaky-tests",
    "scheduling",
    "network",
    "storage",
]
TYPES = ["fact", "decision", "preference", "lesson", "rule", "warning", "theory", "plan"]
CONFIDENCE = ["confirmed", "unconfirmed", "theory"]
TIERS = ["maintainer", "member", "member", "member", "guest", "guest"]


_ID_CACHE: dict[tuple[int, int], str] = {}


def author_seed(seed: int, author: int) -> bytes:
    return hashlib.sha256(f"dreampool-bench/{seed}/{author}".encode()).digest()


def sentence(rng: random.Random, zh: bool) -> str:
    if zh:
        return rng.choice(ZH_SUBJECTS) + rng.choice(ZH_VERBS) + rng.choice(ZH_OBJECTS) + "。"
    s = f"{rng.choice(EN_SUBJECTS)} {rng.choice(EN_VERBS)} {rng.choice(EN_OBJECTS)}."
    return s[0].upper() + s[1:]


def make_draft(rng: random.Random, n: int, author: str, parent: str | None) -> dict[str, Any]:
    zh = rng.random() < 0.5
    words = "零一二三四五六七八九"
    label = "".join(words[int(c)] for c in str(n)) if zh else _spell(n)
    title = (f"第{label}号梦：" if zh else f"Dream {label}: ") + sentence(rng, zh)[:80]
    entries = [
        {
            "text": " ".join(sentence(rng, zh) for _ in range(rng.randint(1, 3))),
            "type": rng.choice(TYPES),
            "confidence": rng.choice(CONFIDENCE),
        }
        for _ in range(rng.randint(2, 6))
    ]
    body: dict[str, Any] = {
        "author": author,
        "title": title[:120],
        "summary": " ".join(sentence(rng, zh) for _ in range(rng.randint(2, 5)))
        + "\n\n- **"
        + rng.choice(TAGS)
        + "**: "
        + sentence(rng, zh),
        "entries": entries,
        "tags": rng.sample(TAGS, rng.randint(1, 4)),
        "consent": {
            "share": True,
            "derivatives": rng.random() < 0.8,
            "anonymize": rng.random() < 0.05,
        },
    }
    if parent is not None:
        body["lineage"] = {"parent": parent, "generation": 1}
    return body


def _spell(n: int) -> str:
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    return "-".join(names[int(c)] for c in str(n))


def _write_key(content: Path, seed_bytes: bytes, author: str, tier: str) -> None:
    """The key directory's entry for ``seed_bytes``' public key, unless it has one."""
    public = ed25519.public_key_of(seed_bytes)
    key_path = content / "keys" / (dreamfmt.key_id(public)[7:] + ".yaml")
    if not key_path.exists():
        key_path.write_text(
            f'author: "{author}"\npublicKey: {b64url_encode(public)}\n'
            f"tier: {tier}\nadded: '2026-11-01'\n"
        )


def generate(out: Path, n: int, *, seed: int = 1, start: int = 0) -> list[str]:
    content = out / "content"
    (content / "dreams").mkdir(parents=True, exist_ok=True)
    (content / "keys").mkdir(parents=True, exist_ok=True)
    if start == 0:
        (content / "pool.yaml").write_text(
            "title: Benchmark pool\norigin: bench.example/pool\nbase_url: /\nk: 3\n"
        )
    ids: list[str] = []
    authors = max(1, n // 20)
    for i in range(start, n):
        rng = random.Random(f"{seed}/{i}")
        a = rng.randrange(authors) if i >= authors else i
        author = f"agent-{_spell(a)}"
        seed_bytes = author_seed(seed, a)
        _write_key(content, seed_bytes, author, TIERS[a % len(TIERS)])
        parent = None
        if i > 10 and rng.random() < 0.1:
            parent = _ID_CACHE.get((seed, rng.randrange(i)))
        draft = make_draft(rng, i, author, parent)
        if anonymity.is_anonymized(draft):
            # As `dreampool sign` does it: a one-time key under the reserved name,
            # registered as a guest (a pool refuses an anonymized dream its author's
            # key signs, and would re-report it every build).
            draft = anonymity.anonymous_draft(draft)
            seed_bytes = hashlib.sha256(f"dreampool-bench/{seed}/anonymous/{i}".encode()).digest()
            _write_key(content, seed_bytes, anonymity.NAME, "guest")
        signed = dreamfmt.sign(draft, seed_bytes)
        dream_id = dreamfmt.dream_id(b64url_decode(signed["sig"]["value"]))
        (content / "dreams" / f"{dream_id}.json").write_text(
            json.dumps(signed, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        ids.append(dream_id)
        _ID_CACHE[(seed, i)] = dream_id
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args()
    ids = generate(args.out, args.n, seed=args.seed, start=args.start)
    print(f"wrote {len(ids)} dreams to {args.out / 'content'}")


if __name__ == "__main__":
    main()
