import type { Queryable } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { hashToken, newToken } from '../platform/tokens.ts';
import { SESSION_PREFIX } from './credentials.ts';
import { decoyPasswordHash, verifyPassword } from './passwords.ts';
import { findUserByEmail, type User } from './users.ts';

export interface NewSession {
  token: string;
  expires_at: Date;
}

export async function createSession(db: Queryable, user: User, ttlHours: number): Promise<NewSession> {
  const token = newToken(SESSION_PREFIX);
  const { rows } = await db.query<{ expires_at: Date }>(
    `INSERT INTO sessions (organization_id, user_id, token_hash, expires_at)
     VALUES ($1, $2, $3, now() + make_interval(hours => $4)) RETURNING expires_at`,
    [user.organization_id, user.id, hashToken(token), ttlHours],
  );
  return { token, expires_at: rows[0]!.expires_at };
}

/** Email and password to a session. Every failure reads the same, and takes the same time. */
export async function login(db: Queryable, email: string, password: string, ttlHours: number): Promise<NewSession> {
  const user = await findUserByEmail(db, email);
  const ok = await verifyPassword(password, user?.password_hash ?? (await decoyPasswordHash()));
  if (!user || !user.password_hash || !ok) {
    throw new ServiceError('invalid_credentials', 'Email or password is incorrect');
  }
  // Expired sessions of this user are cleared here rather than by a sweeper.
  await db.query('DELETE FROM sessions WHERE user_id = $1 AND expires_at <= now()', [user.id]);
  return createSession(db, user, ttlHours);
}

export async function endSession(db: Queryable, sessionId: string): Promise<void> {
  await db.query('DELETE FROM sessions WHERE id = $1', [sessionId]);
}
