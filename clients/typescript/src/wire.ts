// The wire form of the API is snake_case JSON; the client's is camelCase. Each record has a
// shape: a map from its wire field names to its client field names, nested for the fields that
// are records themselves. The same shapes convert answers and requests, and the contract test
// (test/unit/contract.test.ts) compares them with api/openapi.yaml, so that a field added to the
// API without the client following fails the tests rather than vanishing silently.
//
// A field mapped to a plain name is copied as it is: scalars, and the values that are not the
// API's own records (a chain manifest, server meta, NEAR's outcome and actions), which keep
// their keys untouched.

/** One field of a shape: the client's name, or the client's name and the shape of a nested record. */
export type Field = string | { readonly name: string; readonly shape: Shape; readonly list?: boolean };

/** A record's shape: wire field name → client field. */
export type Shape = { readonly [wire: string]: Field };

type Names<S> = { [K in keyof S]: S[K] extends string ? S[K] : S[K] extends { name: infer N } ? N : never }[keyof S];

/**
 * Checks at compile time that shape S names every field of T and only fields of T: a field
 * added to T without its wire name (or the reverse) does not compile.
 */
export type ShapeOf<T, S> = [Exclude<keyof T, Names<S>>] extends [never]
  ? [Exclude<Names<S>, keyof T>] extends [never]
    ? S
    : { error: 'the shape names fields the type lacks'; fields: Exclude<Names<S>, keyof T> }
  : { error: 'the shape lacks fields of the type'; fields: Exclude<keyof T, Names<S>> };

/** Declares the shape of T, checked against T's fields. */
export function shape<T>() {
  return <const S extends Shape>(s: S & ShapeOf<T, S>): S => s;
}

/** The client form of a wire record (a JSON object answered by the server). */
export function decode<T>(s: Shape, wire: unknown): T {
  if (wire === null || typeof wire !== 'object' || Array.isArray(wire)) return wire as T;
  const w = wire as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(s)) {
    if (!(key in w)) continue;
    const v = w[key];
    if (typeof field === 'string') out[field] = v;
    else if (field.list) out[field.name] = Array.isArray(v) ? v.map((x) => decode(field.shape, x)) : v;
    else out[field.name] = decode(field.shape, v);
  }
  return out as T;
}

/** The wire form of a client record; fields that are undefined are left out. */
export function encode(s: Shape, value: object): Record<string, unknown> {
  const v = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(s)) {
    const name = typeof field === 'string' ? field : field.name;
    const x = v[name];
    if (x === undefined) continue;
    if (typeof field === 'string' || x === null) out[key] = x;
    else if (field.list) out[key] = Array.isArray(x) ? x.map((e) => encode(field.shape, e as object)) : x;
    else out[key] = encode(field.shape, x as object);
  }
  return out;
}
