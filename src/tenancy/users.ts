import type { Queryable } from '../platform/db/database.ts';
import { isUniqueViolation } from '../platform/db/database.ts';
import { ServiceError } from '../platform/errors.ts';
import { hashPassword } from './passwords.ts';

export interface User {
  id: string;
  organization_id: string;
  email: string;
  created_at: Date;
}

export const MIN_PASSWORD_LENGTH = 12;

export async function createUser(
  db: Queryable,
  input: { organizationId: string; email: string; password?: string },
): Promise<User> {
  const email = input.email.trim();
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
    throw new ServiceError('validation_error', `"${email}" is not an email address`, 'email');
  }
  if (input.password !== undefined && input.password.length < MIN_PASSWORD_LENGTH) {
    throw new ServiceError('validation_error', `Passwords have at least ${MIN_PASSWORD_LENGTH} characters`, 'password');
  }
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
  try {
    const { rows } = await db.query<User>(
      `INSERT INTO users (organization_id, email, password_hash) VALUES ($1, $2, $3)
       RETURNING id, organization_id, email, created_at`,
      [input.organizationId, email, passwordHash],
    );
    return rows[0]!;
  } catch (error) {
    if (isUniqueViolation(error))
      throw new ServiceError('conflict', `A user with email ${email} exists already`, 'email');
    throw error;
  }
}

export async function findUserByEmail(
  db: Queryable,
  email: string,
): Promise<(User & { password_hash: string | null }) | undefined> {
  const { rows } = await db.query<User & { password_hash: string | null }>(
    'SELECT id, organization_id, email, password_hash, created_at FROM users WHERE lower(email) = lower($1)',
    [email.trim()],
  );
  return rows[0];
}

/** An organization's users, oldest first. */
export async function listUsers(db: Queryable, organizationId: string): Promise<User[]> {
  const { rows } = await db.query<User>(
    'SELECT id, organization_id, email, created_at FROM users WHERE organization_id = $1 ORDER BY created_at, id',
    [organizationId],
  );
  return rows;
}

/**
 * Sets a user's password and ends the user's sessions (whoever held one signs in again with the new
 * password). Undefined when the organization has no such user.
 */
export async function setUserPassword(
  db: Queryable,
  input: { organizationId: string; email: string; password: string },
): Promise<User | undefined> {
  if (input.password.length < MIN_PASSWORD_LENGTH) {
    throw new ServiceError('validation_error', `Passwords have at least ${MIN_PASSWORD_LENGTH} characters`, 'password');
  }
  const passwordHash = await hashPassword(input.password);
  const { rows } = await db.query<User>(
    `WITH changed AS (
       UPDATE users SET password_hash = $3 WHERE organization_id = $1 AND lower(email) = lower($2)
       RETURNING id, organization_id, email, created_at
     ), ended AS (
       DELETE FROM sessions WHERE user_id IN (SELECT id FROM changed)
     )
     SELECT * FROM changed`,
    [input.organizationId, input.email.trim(), passwordHash],
  );
  return rows[0];
}
