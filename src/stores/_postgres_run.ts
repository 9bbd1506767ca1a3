/**
 * How the PostgreSQL store's modules run statements: one function that sends
 * a constant statement with `$n` parameters (prepared once per connection)
 * inside the transaction the store opened, and resolves with its rows.
 *
 * @internal
 * @module
 */

/** Rows as the driver returns them, with the count of rows a statement changed. */
export type Rows<Row> = Row[] & { readonly count: number };

/** Runs one statement in the current transaction. */
export type Run = <Row = Record<string, unknown>>(
  text: string,
  params?: readonly unknown[],
) => Promise<Rows<Row>>;
