/**
 * HTML built from templates that escape every value put into them: text
 * that comes from jobs (payloads, errors, names) can never become markup.
 * Only {@linkcode Html} values, made by {@linkcode html} itself or by
 * {@linkcode trusted} for constant markup, pass through as they are.
 *
 * @internal
 * @module
 */

/** Markup that is safe to put in a page as it is. */
export class Html {
  /** The markup. */
  readonly text: string;

  /** Wraps markup already known to be safe; use {@linkcode html} or {@linkcode trusted}. */
  constructor(text: string) {
    this.text = text;
  }

  /** The markup. */
  toString(): string {
    return this.text;
  }
}

/** What a template accepts: escaped unless it is {@linkcode Html}; lists are joined; null and undefined and false are nothing. */
export type HtmlValue =
  | Html
  | string
  | number
  | boolean
  | null
  | undefined
  | readonly HtmlValue[];

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Escapes `&`, `<`, `>`, `"` and `'`: safe in text and in quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

/**
 * A template tag: `html\`<td>${name}</td>\`` escapes `name`. Attribute values
 * must be written in double quotes in the template.
 */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let text = strings[0]!;
  values.forEach((value, index) => text += render(value) + strings[index + 1]!);
  return new Html(text);
}

/** Constant markup written in this codebase (never text from a request or a job). */
export function trusted(markup: string): Html {
  return new Html(markup);
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === null || value === undefined || value === false) return "";
  return escapeHtml(String(value));
}
