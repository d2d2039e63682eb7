import { dkimVerify } from 'mailauth';
import type { Queryable } from '../../src/platform/db/database.ts';
import { dkimRecordValue } from '../../src/domains/dkim.ts';

/** mailauth's DKIM verdict on a received message, against the domain's key as its DNS record would publish it. */
export async function dkimResult(db: Queryable, domain: string, raw: Buffer): Promise<string> {
  const { rows } = await db.query<{ dkim_selector: string; dkim_public_key: string }>(
    'SELECT dkim_selector, dkim_public_key FROM domains WHERE name = $1',
    [domain],
  );
  const { results } = await dkimVerify(raw, {
    resolver: async (name: string, type: string) => {
      if (type === 'TXT' && name === `${rows[0]!.dkim_selector}._domainkey.${domain}`) {
        return [[dkimRecordValue(rows[0]!.dkim_public_key)]];
      }
      throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
    },
  });
  return results[0]!.status.result;
}
