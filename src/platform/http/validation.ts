import type { ValidateFunction } from 'ajv';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { bodyAjv, textAjv, toServiceError } from '../validation.ts';

/** Fastify validates each route's body, query string and parameters with Mailroom's rules. */
export const validatorCompiler: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) => {
  const validate: ValidateFunction = (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
  return (data: unknown) => (validate(data) ? { value: data } : { error: toServiceError(validate, httpPart) });
};
