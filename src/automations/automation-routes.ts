import { Type } from 'typebox';
import type { App } from '../platform/http/app-types.ts';
import { PageQuery } from '../platform/db/keyset-page.ts';
import { ServiceError } from '../platform/errors.ts';
import {
  createAutomation,
  deleteAutomation,
  duplicateAutomation,
  getAutomation,
  listAutomations,
  stepCounts,
  stopAutomation,
  updateAutomation,
} from './automations.ts';
import { getRun, listRuns } from './automation-runs.ts';

const IdParams = Type.Object({ id: Type.String() });
const RunParams = Type.Object({ id: Type.String(), run_id: Type.String() });

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Status = Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]);
// Steps and connections are checked by automation-graph.ts, whose refusals name the step by key and
// index and the field within it (steps[3].config.timeout), which a schema's generic message would not.
const Steps = Type.Array(Type.Unknown(), {
  description:
    'The steps: {key, type, config}, one of them the trigger. Types: trigger, send_email, delay, wait_for_event, ' +
    'condition, contact_update, contact_delete, add_to_segment',
});
const Connections = Type.Array(Type.Unknown(), {
  description: 'The connections between steps: {from, to, type?}, type default when left out',
});

const CreateBody = Type.Object(
  { name: Name, status: Type.Optional(Status), steps: Steps, connections: Connections },
  { additionalProperties: false },
);
// An empty PATCH is a mistake on the caller's side, not a no-op.
const UpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    status: Type.Optional(Status),
    steps: Type.Optional(Steps),
    connections: Type.Optional(Connections),
  },
  { additionalProperties: false, minProperties: 1 },
);
const ListQuery = Type.Object(
  { ...PageQuery.properties, status: Type.Optional(Status) },
  { additionalProperties: false },
);
const RunsQuery = Type.Object(
  {
    ...PageQuery.properties,
    status: Type.Optional(
      Type.String({
        maxLength: 100,
        description: 'Statuses separated by commas: running, completed, failed, cancelled',
      }),
    ),
  },
  { additionalProperties: false },
);

/**
 * Resend's /automations: their graphs (checked by automation-graph.ts, versioned by automations.ts),
 * status, copies, stop, and their runs; and Mailroom's own step counts for the dashboard.
 */
export async function automationRoutes(app: App) {
  app.post(
    '/automations',
    { config: { access: 'full' }, schema: { summary: 'Create an automation', body: CreateBody } },
    async (request, reply) => {
      const { id } = await createAutomation(app.db, request.principal.organizationId, request.body);
      return reply.code(201).send({ object: 'automation', id });
    },
  );

  app.get(
    '/automations',
    { config: { access: 'full' }, schema: { summary: 'List automations', querystring: ListQuery } },
    async (request) => listAutomations(app.db, request.principal.organizationId, request.query),
  );

  app.get(
    '/automations/:id',
    { config: { access: 'full' }, schema: { summary: 'Read an automation and its current graph', params: IdParams } },
    async (request) => getAutomation(app.db, request.principal.organizationId, request.params.id),
  );

  app.patch(
    '/automations/:id',
    {
      config: { access: 'full' },
      schema: {
        summary: 'Rename, enable or disable an automation, or give it a new graph',
        params: IdParams,
        body: UpdateBody,
      },
    },
    async (request) => {
      const { steps, connections } = request.body;
      if ((steps === undefined) !== (connections === undefined)) {
        const missing = steps === undefined ? 'steps' : 'connections';
        throw new ServiceError(
          'validation_error',
          `${missing}: steps and connections make the graph together: send both, or neither`,
          missing,
        );
      }
      const { id } = await updateAutomation(app.db, request.principal.organizationId, request.params.id, request.body);
      return { object: 'automation', id };
    },
  );

  app.delete(
    '/automations/:id',
    { config: { access: 'full' }, schema: { summary: 'Delete an automation and its runs', params: IdParams } },
    async (request) => {
      const { id } = await deleteAutomation(app.db, request.principal.organizationId, request.params.id);
      return { object: 'automation', id, deleted: true };
    },
  );

  app.post(
    '/automations/:id/duplicate',
    {
      config: { access: 'full' },
      schema: { summary: 'Copy an automation (its current graph) into a new disabled one', params: IdParams },
    },
    async (request, reply) => {
      const { id } = await duplicateAutomation(app.db, request.principal.organizationId, request.params.id);
      return reply.code(201).send({ object: 'automation', id });
    },
  );

  app.post(
    '/automations/:id/stop',
    {
      config: { access: 'full' },
      schema: { summary: 'Disable an automation and cancel its running runs', params: IdParams },
    },
    async (request) => {
      const { id } = await stopAutomation(app.db, request.principal.organizationId, request.params.id);
      return { object: 'automation', id, status: 'disabled' };
    },
  );

  app.get(
    '/automations/:id/runs',
    {
      config: { access: 'full' },
      schema: { summary: "List an automation's runs", params: IdParams, querystring: RunsQuery },
    },
    async (request) => listRuns(app.db, request.principal.organizationId, request.params.id, request.query),
  );

  app.get(
    '/automations/:id/runs/:run_id',
    { config: { access: 'full' }, schema: { summary: 'Read a run and the steps it entered', params: RunParams } },
    async (request) => getRun(app.db, request.principal.organizationId, request.params.id, request.params.run_id),
  );

  // Mailroom's own, for the dashboard: how many runs entered each step and where they are.
  app.get(
    '/automations/:id/step-counts',
    {
      config: { access: 'full' },
      schema: { summary: 'Counts of runs at each step of an automation', params: IdParams },
    },
    async (request) => stepCounts(app.db, request.principal.organizationId, request.params.id),
  );
}
