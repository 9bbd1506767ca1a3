/**
 * Reading a child process's output line by line.
 *
 * @module
 */

/** Yields the lines of `stream` as UTF-8 text, without their line ends; a last unended line too. */
export async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buffered = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    buffered += text;
    let end: number;
    while ((end = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, end).replace(/\r$/, "");
      buffered = buffered.slice(end + 1);
    }
  }
  if (buffered !== "") yield buffered;
}
