// The one comparison key of email addresses (addressKey): case and the domain's Unicode spelling do not
// make two addresses different; anything else does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addressKey } from '../src/platform/address-key.ts';

test('addressKey: the local part without case, the domain in lower-case ASCII', () => {
  assert.equal(addressKey('Ann.Lee@Example.COM'), 'ann.lee@example.com');
  assert.equal(addressKey('jörg@Bücher.example'), 'jörg@xn--bcher-kva.example');
  assert.equal(addressKey('JÖRG@xn--bcher-kva.example'), addressKey('jörg@bücher.example'));
  assert.equal(addressKey('a@b@Example.com'), 'a@b@example.com', 'the domain is after the last @');
  assert.notEqual(addressKey('ann@example.com'), addressKey('ann+x@example.com'));
});

test('addressKey: an address as parsed (ASCII, domain lower-cased) keys to itself lower-cased', () => {
  for (const address of ['Ann@example.com', 'x.Y+z@xn--bcher-kva.example', "o'Neil@mail.example.org"]) {
    assert.equal(addressKey(address), address.toLowerCase());
  }
});

test('addressKey: a string without @ keys to itself lower-cased', () => {
  assert.equal(addressKey('Postmaster'), 'postmaster');
  assert.equal(addressKey(''), '');
});
