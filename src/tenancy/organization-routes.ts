import { Type } from 'typebox';
import type { Queryable } from '../platform/db/database.ts';
import type { App } from '../platform/http/app-types.ts';
import { notFound } from '../platform/errors.ts';

// The caller's own organization: read it, and switch open and click tracking. Quota and rate limit are
// the operator's (CLI), so they are shown but not settable here.

/** Only the tracking switches; at least one of them. */
const SettingsBody = Type.Object(
  {
    open_tracking: Type.Optional(Type.Boolean()),
    click_tracking: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);

interface OrganizationRow {
  id: string;
  name: string;
  monthly_quota: number;
  rate_limit: number;
  open_tracking: boolean;
  click_tracking: boolean;
  created_at: Date;
}

const COLUMNS = 'id, name, monthly_quota, rate_limit, open_tracking, click_tracking, created_at';

export async function organizationRoutes(app: App) {
  app.get(
    '/organization',
    { config: { access: 'full' }, schema: { summary: "Read the caller's organization" } },
    async (request) => {
      return view(await findOwn(app.db, request.principal.organizationId));
    },
  );

  app.patch(
    '/organization',
    {
      config: { access: 'full' },
      schema: { summary: 'Turn open or click tracking on or off', body: SettingsBody },
    },
    async (request) => {
      const { rows } = await app.db.query<OrganizationRow>(
        `UPDATE organizations
            SET open_tracking = coalesce($2, open_tracking), click_tracking = coalesce($3, click_tracking)
          WHERE id = $1
          RETURNING ${COLUMNS}`,
        [request.principal.organizationId, request.body.open_tracking ?? null, request.body.click_tracking ?? null],
      );
      return view(rows[0]);
    },
  );
}

async function findOwn(db: Queryable, organizationId: string): Promise<OrganizationRow | undefined> {
  const { rows } = await db.query<OrganizationRow>(`SELECT ${COLUMNS} FROM organizations WHERE id = $1`, [
    organizationId,
  ]);
  return rows[0];
}

function view(row: OrganizationRow | undefined) {
  // A credential outliving its organization is refused before here; this is only a race with deletion.
  if (!row) throw notFound('Organization');
  return {
    object: 'organization',
    id: row.id,
    name: row.name,
    monthly_quota: row.monthly_quota,
    rate_limit: row.rate_limit,
    open_tracking: row.open_tracking,
    click_tracking: row.click_tracking,
    created_at: new Date(row.created_at).toISOString(),
  };
}
