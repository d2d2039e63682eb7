// findUnstorableText on values no HTTP body can carry (the JSON parser refuses one nested more than 64
// levels first) but SMTP submission or any other caller may hand it, and the order it reports in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findUnstorableText } from '../src/platform/text.ts';

const DEPTH = 100_000;

/** A bad string nested DEPTH levels down, alternating objects (key `k`) and arrays; and its dotted path. */
function nested(bad: string): { value: unknown; path: string } {
  let value: unknown = bad;
  const parts: string[] = [];
  for (let level = 0; level < DEPTH; level++) {
    // Built from the bottom up: the outermost level is the last one wrapped, the first of the path.
    if (level % 2 === 0) {
      value = [value];
      parts.push('0');
    } else {
      value = { k: value };
      parts.push('k');
    }
  }
  return { value, path: parts.reverse().join('.') };
}

test(`a bad string nested ${DEPTH} levels deep (arrays and objects) is found by its dotted path, with no stack overflow`, () => {
  for (const bad of ['a\u0000b', 'a\ud800b', '\udc00']) {
    const { value, path } = nested(bad);
    assert.equal(findUnstorableText(value), path);
    assert.equal(findUnstorableText({ body: value }), `body.${path}`);
    assert.equal(findUnstorableText(value, 'root'), `root.${path}`);
  }
  // The same depth with nothing bad at the bottom: walked to the end, nothing found.
  assert.equal(findUnstorableText(nested('fine \ud83d\ude00').value), undefined);
});

test('a bad key nested deep is named by its path', () => {
  let value: unknown = { 'x\u0000': 1 };
  for (let level = 0; level < DEPTH; level++) value = [value];
  assert.equal(findUnstorableText(value), `${'0.'.repeat(DEPTH)}x\u0000`);
});

test('the first bad text in document order: a key right before its own value, that value whole before the next key', () => {
  // A value's bad string comes before a later key's.
  assert.equal(findUnstorableText({ first: ['fine', 'b\u0000d'], 'bad\u0000key': 'fine' }), 'first.1');
  // A key comes before its own value's bad string.
  assert.equal(findUnstorableText({ ok: 'fine', 'k\ud800': { inner: 'b\u0000d' } }), 'k\ud800');
  // Arrays in order, each element whole (its keys and values) before the next.
  assert.equal(findUnstorableText([{ a: 'fine', 'b\u0000': 1 }, { 'c\u0000': 'x' }]), '0.b\u0000');
  assert.equal(findUnstorableText([{ a: { b: ['fine'] } }, 'x\u0000']), '1');
  // Nothing bad, whatever the shape: undefined.
  assert.equal(findUnstorableText({ a: [1, null, true, { b: 'fine' }], c: {} }), undefined);
});
