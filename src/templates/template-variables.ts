import { ServiceError } from '../platform/errors.ts';

// The variables a template declares, each of one of Resend's types with an optional fallback. A send
// fills only declared variables: an undeclared one is refused, so that a typo in a send is an error
// rather than a blank in the message.

export const VARIABLE_TYPES = ['string', 'number', 'boolean', 'object', 'list'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];

/** A value a variable of some type can hold: an object is a JSON object, a list a JSON array. */
export type VariableValue = string | number | boolean | Record<string, unknown> | unknown[];

/**
 * As stored in templates.variables: fallback_value only when there is one; created_at and updated_at
 * (ISO 8601) when the key was first declared and when its declaration last changed.
 */
export interface TemplateVariable {
  key: string;
  type: VariableType;
  fallback_value?: VariableValue;
  created_at?: string;
  updated_at?: string;
}

/** As submitted: a null fallback_value is no fallback (Resend's SDK sends it that way). */
export interface TemplateVariableInput {
  key: string;
  type: VariableType;
  fallback_value?: VariableValue | null;
}

const VARIABLE_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether a key may name a variable: letters, digits and underscores, not starting with a digit. */
export function isVariableKey(key: string): boolean {
  return VARIABLE_KEY.test(key) && key !== '__proto__';
}

/** The error for a key that may not name a variable, at `field`. */
export function invalidVariableKey(key: string, field: string): ServiceError {
  return new ServiceError(
    'validation_error',
    `Invalid variable key ${JSON.stringify(key)}: use letters, digits and underscores, not starting with a digit`,
    field,
  );
}

/** Well-formed, unique keys and fallbacks of the declared type; returns the variables as stored. */
export function checkedVariables(variables: TemplateVariableInput[]): TemplateVariable[] {
  const seen = new Set<string>();
  return variables.map(({ key, type, fallback_value }, index) => {
    const field = `variables.${index}`;
    if (!isVariableKey(key)) throw invalidVariableKey(key, `${field}.key`);
    if (seen.has(key)) throw new ServiceError('validation_error', `Duplicate variable key: ${key}`, `${field}.key`);
    seen.add(key);
    if (fallback_value === undefined || fallback_value === null) return { key, type };
    if (!isOfType(fallback_value, type)) {
      throw new ServiceError(
        'validation_error',
        `The fallback_value of ${key} must be ${article(type)}, not ${describe(fallback_value)}`,
        `${field}.fallback_value`,
      );
    }
    return { key, type, fallback_value };
  });
}

/**
 * The declarations as stored, dated: a key declared before keeps its created_at, and its updated_at
 * unless its type and fallback are unchanged; a new key is dated `now`.
 */
export function datedVariables(
  variables: TemplateVariable[],
  before: TemplateVariable[],
  now: string,
): TemplateVariable[] {
  const previous = new Map(before.map((variable) => [variable.key, variable]));
  return variables.map((variable) => {
    const old = previous.get(variable.key);
    const unchanged =
      old !== undefined &&
      old.type === variable.type &&
      JSON.stringify(old.fallback_value) === JSON.stringify(variable.fallback_value);
    return {
      ...variable,
      created_at: old?.created_at ?? now,
      updated_at: unchanged ? (old.updated_at ?? now) : now,
    };
  });
}

/** The value of every declared variable: the one provided, else the fallback. */
export function resolveVariables(
  declared: TemplateVariable[],
  provided: Record<string, unknown>,
): Record<string, unknown> {
  if (typeof provided !== 'object' || provided === null || Array.isArray(provided)) {
    throw new ServiceError('validation_error', 'template.variables must be an object', 'template.variables');
  }
  const byKey = new Map(declared.map((variable) => [variable.key, variable]));
  const undeclared = Object.keys(provided).filter((key) => !byKey.has(key));
  if (undeclared.length > 0) {
    throw new ServiceError(
      'validation_error',
      `The template does not declare ${undeclared.length === 1 ? 'variable' : 'variables'}: ${undeclared.join(', ')}`,
      undeclared.length === 1 ? `template.variables.${undeclared[0]}` : 'template.variables',
    );
  }
  // No prototype: the template sees the declared variables and nothing else.
  const data: Record<string, unknown> = Object.create(null);
  for (const variable of declared) {
    const field = `template.variables.${variable.key}`;
    const value = Object.hasOwn(provided, variable.key) ? provided[variable.key] : variable.fallback_value;
    if (value === undefined) {
      throw new ServiceError('validation_error', `Missing template variable: ${variable.key}`, field);
    }
    if (!isOfType(value, variable.type)) {
      throw new ServiceError(
        'validation_error',
        `Template variable ${variable.key} must be ${article(variable.type)}, not ${describe(value)}`,
        field,
      );
    }
    data[variable.key] = value;
  }
  return data;
}

export function isOfType(value: unknown, type: VariableType): boolean {
  switch (type) {
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'string':
    case 'boolean':
      return typeof value === type;
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'list':
      return Array.isArray(value);
  }
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return Number.isFinite(value) ? 'a number' : String(value);
  const kind = typeof value;
  return kind === 'object' ? 'an object' : `a ${kind}`;
}

const article = (type: VariableType) => (type === 'object' ? 'an object' : `a ${type}`);
