"""Fixtures of the notification tests: the Slack and PagerDuty test servers, a service wired to them, and a
client session for requests made by hand."""
import aiohttp
import pytest

from testkit.notify_harness import ESCALATION_KEY, ROUTING_ESC, SECRET, TOKEN, Harness, keys
from testkit.pagerduty_server import PagerDutyTestServer
from testkit.slack_server import SlackTestServer


@pytest.fixture
async def slack():
    server = SlackTestServer(token=TOKEN, signing_secret=SECRET)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def harness(tmp_path, slack):
    h = await Harness(tmp_path, slack=slack).start()
    yield h
    await h.stop()


@pytest.fixture
async def pd():
    server = PagerDutyTestServer(routing_keys=[PagerDutyTestServer.ROUTING_KEY, ESCALATION_KEY])
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def paging(tmp_path, slack, pd):
    h = await Harness(tmp_path, slack=slack, pagerduty_url=pd.url, routing_keys=keys(), routing=ROUTING_ESC).start()
    yield h
    await h.stop()


@pytest.fixture
async def session():
    """An aiohttp client session, for requests the tests make by hand."""
    async with aiohttp.ClientSession() as client:
        yield client
