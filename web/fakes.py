"""/fake/<name>/: each platform's fake (``Platform.fake``), served by Django for the demo. Answers
404 for a platform without one or whose ``FAKE_<NAME>_ENABLED`` is off (production never sets it)."""

from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

from campaigns.platforms import FakeRequest, platform_get
from core.exceptions import InvalidInput


@csrf_exempt
def fake_view(request, platform: str, path: str):
    try:
        handle = platform_get(platform).fake()
    except InvalidInput:
        handle = None
    if handle is None:
        raise Http404("No fake is on for this platform.")
    body = request.body  # read before the form, which would consume the stream
    response = handle(
        FakeRequest(
            method=request.method,
            path=path,
            query=request.GET.dict(),
            form=request.POST.dict(),
            body=body,
            authorization=request.headers.get("Authorization", ""),
        )
    )
    if response.location:
        return HttpResponseRedirect(response.location)
    return HttpResponse(response.body, status=response.status, content_type=response.content_type)


urlpatterns = [re_path(r"^(?P<path>.*)$", fake_view, name="fake")]
