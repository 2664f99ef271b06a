// Command verify checks a dreampool site's log with Go's golang.org/x/mod/sumdb
// (note and tlog): a second, independent implementation of signed notes and
// RFC 6962 hashing, proofs and tiles. It reads C2SP tlog-tiles paths through
// a tlog.TileReader, so every hash it trusts comes from the published tiles
// and is checked against the signed checkpoint root.
//
// Usage: go run verify.go SITE_DIR   (GO111MODULE=off GOPATH=/usr/share/gocode)
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var site string

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "interop: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func read(rel string) []byte {
	data, err := os.ReadFile(filepath.Join(site, rel))
	if err != nil {
		fail("%v", err)
	}
	return data
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// open verifies a signed note and parses the checkpoint body (c2sp.org/tlog-checkpoint).
func open(msg []byte, verifiers note.Verifiers) checkpoint {
	n, err := note.Open(msg, verifiers)
	if err != nil {
		fail("note.Open: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		fail("checkpoint has too few lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != 32 {
		fail("checkpoint root: %v", err)
	}
	var root tlog.Hash
	copy(root[:], raw)
	if n.Sigs[0].Name != lines[0] {
		fail("key name %q != origin %q", n.Sigs[0].Name, lines[0])
	}
	return checkpoint{lines[0], size, root}
}

// strict adds docs/protocol.md §1's rule 4 to Go's Ed25519, which refuses S >= L
// (rule 5) but takes an R of small order (R = the identity, S = k·s, verifies
// there): R's y must be below p and none of the five y values of the points of
// small order. Without it, this verifier would accept a note every dreampool
// verifier refuses. The key's own rules are checked once, on the vkey (main).
type strict struct{ note.Verifier }

var (
	fieldP     = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	smallOrder = func() []*big.Int {
		y8 := leInt(mustHex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
		return []*big.Int{
			big.NewInt(1), new(big.Int).Sub(fieldP, big.NewInt(1)), big.NewInt(0),
			y8, new(big.Int).Sub(fieldP, y8),
		}
	}()
)

func mustHex(h string) []byte {
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			panic(err)
		}
		b[i] = byte(v)
	}
	return b
}

// leInt is the little-endian integer of b with bit 255 (x's sign) cleared.
func leInt(b []byte) *big.Int {
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	be[0] &= 0x7f
	return new(big.Int).SetBytes(be)
}

// canonicalPoint reports whether enc is a canonical encoding of a point of the
// curve that is not of small order: docs/protocol.md §1 rules 1–3 for a key
// (rules 1 and 2 for R). Go's ed25519 checks none of them for a key.
func canonicalPoint(enc []byte, mustDecode bool) bool {
	if len(enc) != 32 {
		return false
	}
	y := leInt(enc)
	if y.Cmp(fieldP) >= 0 {
		return false
	}
	for _, small := range smallOrder {
		if y.Cmp(small) == 0 {
			return false
		}
	}
	if !mustDecode {
		return true
	}
	// RFC 8032 §5.1.3: x² = (y² − 1)/(d·y² + 1) must have a root (Euler's criterion).
	d := new(big.Int).Mod(new(big.Int).Mul(big.NewInt(-121665),
		new(big.Int).ModInverse(big.NewInt(121666), fieldP)), fieldP)
	y2 := new(big.Int).Mul(y, y)
	num := new(big.Int).Sub(y2, big.NewInt(1))
	den := new(big.Int).Add(new(big.Int).Mul(d, y2), big.NewInt(1))
	x2 := new(big.Int).Mod(new(big.Int).Mul(num, new(big.Int).ModInverse(den, fieldP)), fieldP)
	if x2.Sign() == 0 {
		return enc[31]&0x80 == 0
	}
	exp := new(big.Int).Rsh(new(big.Int).Sub(fieldP, big.NewInt(1)), 1)
	return new(big.Int).Exp(x2, exp, fieldP).Cmp(big.NewInt(1)) == 0
}

func (s strict) Verify(msg, sig []byte) bool {
	if len(sig) != 64 || !canonicalPoint(sig[:32], false) {
		return false
	}
	return s.Verifier.Verify(msg, sig)
}

// c2spTiles reads tiles by their c2sp.org/tlog-tiles paths (no height segment).
type c2spTiles struct{}

func (c2spTiles) Height() int { return 8 }

func (c2spTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		// tlog's Path is "tile/8/L/N[.p/W]"; C2SP drops the height.
		p := strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		data, err := os.ReadFile(filepath.Join(site, "log", p))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (c2spTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func hashes(text []byte) []tlog.Hash {
	var out []tlog.Hash
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if sc.Text() == "" {
			break
		}
		raw, err := base64.StdEncoding.DecodeString(sc.Text())
		if err != nil || len(raw) != 32 {
			fail("bad hash line %q", sc.Text())
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out
}

func main() {
	site = os.Args[1]
	var vkey string
	for _, line := range strings.Split(string(read("log/policy")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "log" {
			vkey = f[1]
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		fail("vkey: %v", err)
	}
	// docs/protocol.md §4.1: a vkey whose key fails §1's key rules is refused
	// (note.NewVerifier takes any 32 bytes; with the identity as the key,
	// R = B and S = 1 verify every note).
	// name + "+" + 8 hex digits + "+" + base64, which may hold "+" itself (§4.1).
	var raw []byte
	if i := strings.Index(vkey, "+"); i >= 0 && len(vkey) > i+10 {
		raw, err = base64.StdEncoding.DecodeString(vkey[i+10:])
	}
	if err != nil || len(raw) != 33 || !canonicalPoint(raw[1:], true) {
		fail("vkey: the log key fails docs/protocol.md §1's key rules")
	}
	verifiers := note.VerifierList(strict{v})
	cur := open(read("log/checkpoint"), verifiers)
	tree := tlog.Tree{N: cur.size, Hash: cur.root}
	hr := tlog.TileHashReader(tree, c2spTiles{})
	root, err := tlog.TreeHash(cur.size, hr)
	if err != nil || root != cur.root {
		fail("tiles do not give the checkpoint root: %v", err)
	}

	// Entry bundles: each leaf's RFC 6962 hash equals the level-0 tile hash.
	leaves := 0
	for start := int64(0); start < cur.size; start += 256 {
		w := cur.size - start
		if w > 256 {
			w = 256
		}
		t := tlog.Tile{H: 8, L: -1, N: start / 256, W: int(w)}
		p := strings.Replace(t.Path(), "tile/8/data/", "tile/entries/", 1)
		data := read("log/" + p)
		for i := int64(0); i < w; i++ {
			if len(data) < 2 {
				fail("entry bundle %s truncated", p)
			}
			n := int(binary.BigEndian.Uint16(data))
			leaf := data[2 : 2+n]
			data = data[2+n:]
			want, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, start+i)})
			if err != nil || tlog.RecordHash(leaf) != want[0] {
				fail("leaf %d does not match its tile hash", start+i)
			}
			leaves++
		}
		if len(data) != 0 {
			fail("entry bundle %s has trailing bytes", p)
		}
	}

	// Every published checkpoint, and its consistency proof to the current one.
	names, _ := os.ReadDir(filepath.Join(site, "log", "checkpoints"))
	sizes := []int64{}
	for _, e := range names {
		n, _ := strconv.ParseInt(e.Name(), 10, 64)
		sizes = append(sizes, n)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	roots := map[int64]tlog.Hash{}
	for _, m := range sizes {
		old := open(read(fmt.Sprintf("log/checkpoints/%d", m)), verifiers)
		roots[m] = old.root
		if m == cur.size {
			continue
		}
		proof := hashes(read(fmt.Sprintf("log/consistency/%d", m)))
		if err := tlog.CheckTree(proof, cur.size, cur.root, m, old.root); err != nil {
			fail("consistency %d -> %d: %v", m, cur.size, err)
		}
		again, err := tlog.ProveTree(cur.size, m, hr)
		if err != nil || len(again) != len(proof) {
			fail("ProveTree %d: %v", m, err)
		}
		for i := range again {
			if again[i] != proof[i] {
				fail("consistency %d: hash %d differs from Go's proof", m, i)
			}
		}
	}

	// Every dream proof (c2sp.org/tlog-proof@v1).
	proofs := 0
	dirs, _ := os.ReadDir(filepath.Join(site, "dreams"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(site, "dreams", d.Name(), "proof.tlog-proof"))
		if err != nil {
			continue
		}
		parts := bytes.SplitN(data, []byte("\n\n"), 2)
		lines := strings.Split(string(parts[0]), "\n")
		if lines[0] != "c2sp.org/tlog-proof@v1" || !strings.HasPrefix(lines[1], "extra ") {
			fail("%s: bad header", d.Name())
		}
		extra, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[1], "extra "))
		index, _ := strconv.ParseInt(strings.TrimPrefix(lines[2], "index "), 10, 64)
		proof := hashes([]byte(strings.Join(lines[3:], "\n")))
		cp := open(parts[1], verifiers)
		if roots[cp.size] != cp.root {
			fail("%s: embedded checkpoint is not a published one", d.Name())
		}
		if err := tlog.CheckRecord(proof, cp.size, cp.root, index, tlog.RecordHash(extra)); err != nil {
			fail("%s: inclusion: %v", d.Name(), err)
		}
		again, err := tlog.ProveRecord(cp.size, index, hr)
		if err != nil || len(again) != len(proof) {
			fail("%s: ProveRecord: %v", d.Name(), err)
		}
		proofs++
	}
	fmt.Printf("interop ok: size %d, %d leaves, %d checkpoints, %d proofs\n", cur.size, leaves, len(sizes), proofs)
}
