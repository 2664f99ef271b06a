// dreampool merkle.js: RFC 6962 Merkle proofs as a light client checks them
// (RFC 9162 §2.1.3.2 inclusion, §2.1.4.2 consistency), and the site's
// log/consistency/<m> files (docs/protocol.md §4); builder/formats/merkle.py is the Python twin.
//
//     MTH({d(0)}) = SHA-256(0x00 || d(0))                       a leaf hash
//     MTH(D[n])   = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))  k the largest power of 2 < n
//
// The 0x00/0x01 prefixes keep a leaf from ever hashing like an interior node. In the
// tree of 7 leaves d0…d6 the audit path of d6 is [i, k] and the consistency proof
// from size 3 to 7 is [c, d, g, l] (RFC 6962 §2.1.3). Sizes and indices are BigInts:
// bit operations on Numbers stop at 32 bits. Verification throws VerificationError
// with the computed and the wanted root.

import {
  HASH_SIZE,
  VerificationError,
  b64decode,
  bytesEqual,
  concat,
  fail,
  hex,
  latin1,
  sha256,
} from "./crypto.js";

export { VerificationError };

// --- RFC 6962 Merkle proofs (RFC 9162 §2.1.3.2 and §2.1.4.2) -----------------------------------

const MAX_MERKLE_SIZE = (1n << 64n) - 1n; // tree_size is a uint64 (RFC 6962 §3.5)

/** SHA-256(0x00 || data): the hash of a leaf (RFC 6962 §2.1). */
export function leafHash(data) {
  return sha256(concat(Uint8Array.of(0x00), data));
}

/** SHA-256(0x01 || left || right): the hash of an interior node (RFC 6962 §2.1). */
function nodeHash(left, right) {
  return sha256(concat(Uint8Array.of(0x01), left, right));
}

function bitLength(n) {
  return n === 0n ? 0 : n.toString(2).length;
}

function bitCount(n) {
  let count = 0;
  for (const c of n.toString(2)) if (c === "1") count++;
  return count;
}

function trailingZeros(n) {
  return bitLength(n & -n) - 1;
}

// (inner, border): the levels below the point where the paths to index and size-1
// meet, and the left siblings above it along the right border.
function decomposeInclusionProof(index, size) {
  const inner = bitLength(index ^ (size - 1n));
  const border = bitCount(index >> BigInt(inner));
  return [inner, border];
}

// Bit i of index says whether the node at height i is a right child.
async function chainInner(seed, proof, index) {
  for (let i = 0; i < proof.length; i++) {
    seed =
      (index >> BigInt(i)) & 1n ? await nodeHash(proof[i], seed) : await nodeHash(seed, proof[i]);
  }
  return seed;
}

// Only through left siblings: the subtree as it was at an earlier size.
async function chainInnerRight(seed, proof, index) {
  for (let i = 0; i < proof.length; i++) {
    if ((index >> BigInt(i)) & 1n) seed = await nodeHash(proof[i], seed);
  }
  return seed;
}

// Up the right border, where every sibling is a left one.
async function chainBorderRight(seed, proof) {
  for (const h of proof) seed = await nodeHash(h, seed);
  return seed;
}

function checkHashes(proof) {
  proof.forEach((h, i) => {
    if (h.length !== HASH_SIZE) fail(`proof hash ${i} is ${h.length} bytes, want ${HASH_SIZE}`);
  });
}

/**
 * RFC 9162 §2.1.3.2: the proof shows leafHash at index in the tree of size with root.
 * Requires 0 <= index < size (BigInts). Throws VerificationError with both roots.
 */
export async function verifyInclusion(leaf, index, size, proof, root) {
  if (!(index >= 0n && index < size && size <= MAX_MERKLE_SIZE)) {
    fail(
      `leaf index ${index} is not inside a tree of size ${size} (want 0 <= index < size < 2^64)`,
    );
  }
  if (leaf.length !== HASH_SIZE) fail(`leaf hash is ${leaf.length} bytes, want ${HASH_SIZE}`);
  checkHashes(proof);
  const [inner, border] = decomposeInclusionProof(index, size);
  if (proof.length !== inner + border) {
    fail(
      `inclusion proof has ${proof.length} hashes, want ${inner + border} for leaf ${index} of a tree of size ${size}`,
    );
  }
  const got = await chainBorderRight(
    await chainInner(leaf, proof.slice(0, inner), index),
    proof.slice(inner),
  );
  if (!bytesEqual(got, root)) {
    fail(
      `inclusion proof for leaf ${index} of a tree of size ${size} gives root ${hex(got)}, want ${hex(root)}`,
    );
  }
}

/**
 * RFC 9162 §2.1.4.2: the tree of size2 with root2 extends the tree of size1 with root1.
 * Requires 0 < size1 <= size2 (BigInts); equal sizes need an empty proof and equal roots.
 */
export async function verifyConsistency(size1, size2, root1, root2, proof) {
  if (size1 === size2) {
    checkSizes(size1, size2);
    if (proof.length)
      fail(`consistency proof between equal sizes ${size1} has ${proof.length} hashes, want 0`);
    if (!bytesEqual(root1, root2)) {
      fail(
        `consistency proof from size ${size1} to ${size2} gives root ${hex(root1)}, want ${hex(root2)}`,
      );
    }
    return;
  }
  const [got1, got2] = await consistencyRoots(size1, size2, root1, proof);
  if (!bytesEqual(got1, root1)) {
    fail(
      `consistency proof from size ${size1} to ${size2} gives old root ${hex(got1)}, want ${hex(root1)}`,
    );
  }
  if (!bytesEqual(got2, root2)) {
    fail(
      `consistency proof from size ${size1} to ${size2} gives new root ${hex(got2)}, want ${hex(root2)}`,
    );
  }
}

function checkSizes(size1, size2) {
  if (size1 < 0n || size2 < size1) fail(`tree sizes go backwards: ${size1} to ${size2}`);
  if (size2 > MAX_MERKLE_SIZE) fail(`tree size ${size2} does not fit in 64 bits`);
  // Every tree extends the empty one, so a proof from size 0 proves nothing.
  if (size1 === 0n)
    fail("a consistency proof from the empty tree (size 0) is meaningless; want size1 > 0");
}

/**
 * The two roots a consistency proof from size1 to size2 > size1 rebuilds (RFC 9162
 * §2.1.4.2 step 6): [old root, new root]. Throws only when the proof cannot be one
 * (sizes, hash count or length). When size1 is a power of two the old root is the
 * proof's seed, so it is root1 by construction and only the new root can disagree.
 */
export async function consistencyRoots(size1, size2, root1, proof) {
  checkSizes(size1, size2);
  if (size1 === size2) fail("consistencyRoots needs size1 < size2");
  if (!proof.length) fail(`consistency proof from size ${size1} to ${size2} is empty`);
  checkHashes(proof);
  // The proof is the inclusion proof, in the tree of size2, of the node at level
  // shift that ends at size1, preceded by that node's hash unless it is the whole
  // old tree (size1 a power of two), in which case root1 is that hash.
  let [inner, border] = decomposeInclusionProof(size1 - 1n, size2);
  const shift = trailingZeros(size1);
  inner -= shift;
  let seed;
  let path;
  if (size1 === 1n << BigInt(shift)) {
    [seed, path] = [root1, proof];
  } else {
    [seed, path] = [proof[0], proof.slice(1)];
  }
  const want = proof.length - path.length + inner + border;
  if (proof.length !== want) {
    fail(
      `consistency proof from size ${size1} to ${size2} has ${proof.length} hashes, want ${want}`,
    );
  }
  const nodeIndex = (size1 - 1n) >> BigInt(shift);
  // The hashes left of the path rebuild root1 ...
  const got1 = await chainBorderRight(
    await chainInnerRight(seed, path.slice(0, inner), nodeIndex),
    path.slice(inner),
  );
  // ... and all of them rebuild root2.
  const got2 = await chainBorderRight(
    await chainInner(seed, path.slice(0, inner), nodeIndex),
    path.slice(inner),
  );
  return [got1, got2];
}

// --- log/consistency/<m> (docs/protocol.md §4) -----------------------------------------------------

const MAX_CONSISTENCY_HASHES = 128;
export const MAX_CONSISTENCY_SIZE = MAX_CONSISTENCY_HASHES * 45;

/** One canonical b64 hash per line, each line ending in a newline; empty = equal sizes. */
export function parseConsistencyProof(bytes) {
  if (bytes.length > MAX_CONSISTENCY_SIZE) {
    fail(`consistency proof is ${bytes.length} bytes, want at most ${MAX_CONSISTENCY_SIZE}`);
  }
  if (!bytes.length) return [];
  if (bytes[bytes.length - 1] !== 0x0a) fail("consistency proof: the last line has no newline");
  const lines = [];
  let start = 0;
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start);
    lines.push(bytes.subarray(start, end));
    start = end + 1;
  }
  return lines.map((raw, i) => {
    let h;
    try {
      h = b64decode(latin1(raw));
    } catch {
      fail(`consistency proof line ${i + 1}: not canonical base64 (RFC 4648 §4)`);
    }
    if (h.length !== HASH_SIZE)
      fail(`consistency proof line ${i + 1}: hash is ${h.length} bytes, want ${HASH_SIZE}`);
    return h;
  });
}
