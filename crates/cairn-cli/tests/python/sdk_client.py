"""Drives `cairn serve` with LangGraph's official Python client, the way deepagents' async
subagents do: create a thread, start a background run, poll it to success, read the final
message from the thread's values. Also a wait, a stream and the store through the same client.

Usage: python sdk_client.py URL TOKEN   (prints one JSON line with what it saw)
"""

import asyncio
import json
import sys

from langgraph_sdk import get_client


async def main(url: str, token: str) -> None:
    client = get_client(url=url, api_key=token or None, headers={"x-auth-scheme": "langsmith"})
    seen = {}
    thread = await client.threads.create()
    run = await client.runs.create(
        thread_id=thread["thread_id"],
        assistant_id="agent",
        input={"messages": [{"role": "user", "content": "make hello.py"}]},
    )
    seen["created_status"] = run["status"]
    for _ in range(600):
        run = await client.runs.get(thread_id=thread["thread_id"], run_id=run["run_id"])
        if run["status"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.05)
    seen["status"] = run["status"]
    state = await client.threads.get(thread_id=thread["thread_id"])
    messages = state["values"]["messages"]
    seen["last"] = messages[-1]["content"]
    seen["thread_status"] = state["status"]

    # A follow-up on the same thread with the interrupt strategy (deepagents' update tool).
    run2 = await client.runs.create(
        thread_id=thread["thread_id"],
        assistant_id="agent",
        input={"messages": [{"role": "user", "content": "and again"}]},
        multitask_strategy="interrupt",
    )
    joined = await client.runs.join(thread["thread_id"], run2["run_id"])
    seen["joined_messages"] = len(joined["messages"])

    waited = await client.runs.wait(
        None, "agent", input={"messages": [{"role": "user", "content": "make hello.py"}]}
    )
    seen["wait_last"] = waited["messages"][-1]["content"]

    events = []
    async for part in client.runs.stream(
        thread["thread_id"],
        "agent",
        input={"messages": [{"role": "user", "content": "make hello.py"}]},
        stream_mode=["values", "updates"],
    ):
        events.append(part.event)
    seen["stream_events"] = events

    await client.store.put_item(["prefs", "u1"], "tone", {"value": "brief"})
    item = await client.store.get_item(["prefs", "u1"], "tone")
    seen["store"] = item["value"]
    found = await client.store.search_items(["prefs"])
    seen["store_found"] = len(found["items"])

    assistants = await client.assistants.search(graph_id="agent")
    seen["assistant"] = assistants[0]["graph_id"]
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
